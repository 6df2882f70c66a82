// When the request being handled on this thread arrived (its headers were read). cpp-httplib
// handles a request start to finish on one worker thread, so a thread-local carries the time
// from the pre-routing hook to the handler (latency metrics) and to the access log.
#pragma once

#include <chrono>

namespace mlaserve::server {

void mark_request_arrival();
std::chrono::steady_clock::time_point request_arrival();
double seconds_since_request_arrival();

}  // namespace mlaserve::server
