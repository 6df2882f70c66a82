// Reading the JSON files that subcommands take as input, with errors that name the file and the
// item at fault.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mlaserve::tools {

nlohmann::json read_json_file(const std::string& path);

// `ids` must be a JSON array of integer token ids; `where` names it in errors ("in.json: item 3").
std::vector<int32_t> read_token_ids(const nlohmann::json& ids, const std::string& where);

}  // namespace mlaserve::tools
