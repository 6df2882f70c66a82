// Temporary directories and whole-file reads and writes (tests run from the repository root).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mlaserve::testing {

// A fresh temporary directory, removed when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

  TempDir(const TempDir&) = delete;  // (one owner removes it)
  TempDir& operator=(const TempDir&) = delete;

 private:
  std::filesystem::path path_;
};

// The whole file; throws std::runtime_error naming it when it cannot be opened.
std::string read_text(const std::filesystem::path& path);

nlohmann::json read_json(const std::filesystem::path& path);
// The records of a JSON-lines file, one per line; none when there is no file.
std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path);
void write_json(const std::filesystem::path& path, const nlohmann::json& j);

}  // namespace mlaserve::testing
