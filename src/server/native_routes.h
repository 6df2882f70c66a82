// SGLang-native routes: /generate, health and info, cache and abort control, tokenization,
// and Prometheus /metrics.
#pragma once

#include "server/route_table.h"
#include "server/server_context.h"

namespace mlaserve::server {

void add_native_routes(RouteTable& routes, ServerContext& context);

}  // namespace mlaserve::server
