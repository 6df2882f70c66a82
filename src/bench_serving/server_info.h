// What bench-serving asks the server before the run.
#pragma once

#include <string>

#include "bench_serving/http_client.h"

namespace mlaserve::bench_serving {

// The directory of the served model's tokenizer, from GET /get_model_info's "tokenizer_path"
// (SGLang and mlaserve report it). It is a path on the server's machine, so it is only useful
// when both run on one host; an Error that says to pass --tokenizer otherwise.
std::string served_tokenizer_dir(const HttpClient& client);

// The first model id of GET /v1/models, or "default" when the server does not say.
std::string served_model_name(const HttpClient& client);

}  // namespace mlaserve::bench_serving
