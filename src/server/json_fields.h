// Typed reads of request-body fields. A field that is absent or null reads as "not given"
// (many clients send null for options they leave unset); a field of the wrong type is a 400
// that names it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mlaserve::server {

// Parses a request body that must be a JSON object (400 otherwise, with the parser's reason).
nlohmann::json parse_json_object(const std::string& body);
// Parses JSON text found inside a request (e.g. a schema sent as a string); a 400 naming `what`
// and `param` if it is not valid JSON.
nlohmann::json parse_json_text(const std::string& text, std::string_view what,
                               std::string_view param);
// The same, keeping object keys in the text's order (a JSON schema's properties).
nlohmann::ordered_json parse_ordered_json_text(const std::string& text, std::string_view what,
                                               std::string_view param);

// The value of `key`, or nullptr when it is absent or null.
const nlohmann::json* field(const nlohmann::json& object, std::string_view key);

// Integers also accept integral floats such as 10.0 (what JavaScript clients may send).
std::optional<int64_t> read_int(const nlohmann::json& object, std::string_view key);
std::optional<double> read_number(const nlohmann::json& object, std::string_view key);
std::optional<bool> read_bool(const nlohmann::json& object, std::string_view key);
std::optional<std::string> read_string(const nlohmann::json& object, std::string_view key);
// A string or a list of strings (the "stop" field); empty when not given.
std::vector<std::string> read_string_or_list(const nlohmann::json& object, std::string_view key);

// Token ids in [0, vocab_size): `value` must be an array of integers. `param` names it in errors.
std::vector<int32_t> read_token_ids(const nlohmann::json& value, std::string_view param,
                                    int32_t vocab_size);

}  // namespace mlaserve::server
