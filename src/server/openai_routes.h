// OpenAI-compatible routes: GET /v1/models, POST /v1/completions, POST /v1/chat/completions.
#pragma once

#include "server/route_table.h"
#include "server/server_context.h"

namespace mlaserve::server {

void add_openai_routes(RouteTable& routes, ServerContext& context);

}  // namespace mlaserve::server
