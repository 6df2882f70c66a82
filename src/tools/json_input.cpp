#include "tools/json_input.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace mlaserve::tools {

using nlohmann::json;

json read_json_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) fail("cannot open {}", path);
  std::stringstream contents;
  contents << file.rdbuf();
  try {
    return json::parse(contents.str());
  } catch (const json::exception& e) {
    fail("{} is not valid JSON: {}", path, e.what());
  }
}

std::vector<int32_t> read_token_ids(const json& ids, const std::string& where) {
  if (!ids.is_array()) {
    fail("{} has JSON type {}, expected an array of token ids", where, ids.type_name());
  }
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (const json& id : ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < INT32_MIN || id.get<int64_t>() > INT32_MAX) {
      fail("{} holds {}, which is not a token id (an integer)", where, id.dump());
    }
    out.push_back(id.get<int32_t>());
  }
  return out;
}

}  // namespace mlaserve::tools
