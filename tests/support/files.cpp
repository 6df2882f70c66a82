#include "support/files.h"

#include <stdlib.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace mlaserve::testing {

TempDir::TempDir() {
  std::string templ = (std::filesystem::temp_directory_path() / "mlaserve-test-XXXXXX").string();
  if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("cannot create " + templ);
  path_ = templ;
}

TempDir::~TempDir() {
  std::filesystem::remove_all(path_);
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream file(path);
  if (!file) {
    throw std::runtime_error("cannot open " + path.string() + " (run from the repository root)");
  }
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

nlohmann::json read_json(const std::filesystem::path& path) {
  return nlohmann::json::parse(read_text(path));
}

std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  std::ofstream(path) << j.dump();
}

}  // namespace mlaserve::testing
