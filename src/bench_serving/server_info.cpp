#include "bench_serving/server_info.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mlaserve::bench_serving {

using nlohmann::json;

std::string served_tokenizer_dir(const HttpClient& client) {
  const HttpResult http = client.get("/get_model_info");
  if (!http.ok()) {
    fail("cannot ask the server for its tokenizer (GET /get_model_info: {}); pass --tokenizer DIR",
         http.describe());
  }
  const json info = json::parse(http.body, nullptr, false);
  if (!info.is_object() || !info.contains("tokenizer_path") ||
      !info["tokenizer_path"].is_string()) {
    fail("GET /get_model_info has no \"tokenizer_path\"; pass --tokenizer DIR");
  }
  std::filesystem::path path = info["tokenizer_path"].get<std::string>();
  if (std::filesystem::is_regular_file(path)) path = path.parent_path();  // .../tokenizer.json
  if (!std::filesystem::exists(path / "tokenizer.json")) {
    fail(
        "the server's tokenizer_path {} has no tokenizer.json here (is the server on another "
        "host?); pass --tokenizer DIR",
        path.string());
  }
  return path.string();
}

std::string served_model_name(const HttpClient& client) {
  const HttpResult http = client.get("/v1/models");
  if (!http.ok()) return "default";
  const json models = json::parse(http.body, nullptr, false);
  if (!models.is_object() || !models.contains("data") || !models["data"].is_array() ||
      models["data"].empty() || !models["data"][0].is_object()) {
    return "default";
  }
  const json& first = models["data"][0];
  return first.contains("id") && first["id"].is_string() ? first["id"].get<std::string>()
                                                         : "default";
}

}  // namespace mlaserve::bench_serving
