#include "server/request_clock.h"

namespace mlaserve::server {

namespace {

thread_local std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();

}  // namespace

void mark_request_arrival() {
  arrival = std::chrono::steady_clock::now();
}

std::chrono::steady_clock::time_point request_arrival() {
  return arrival;
}

double seconds_since_request_arrival() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - arrival).count();
}

}  // namespace mlaserve::server
