// The handlers behind the SGLang-native routes.
#pragma once

#include <httplib.h>

#include "server/server_context.h"

namespace mlaserve::server {

void handle_generate(ServerContext& context, const httplib::Request& request,
                     httplib::Response& response);
void handle_health_generate(ServerContext& context, const httplib::Request& request,
                            httplib::Response& response);
void handle_tokenize(const ServerContext& context, const httplib::Request& request,
                     httplib::Response& response);
void handle_detokenize(const ServerContext& context, const httplib::Request& request,
                       httplib::Response& response);

}  // namespace mlaserve::server
