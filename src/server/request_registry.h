// Requests in flight by their API id (SGLang's "rid"; the "cmpl-..." id for OpenAI routes), so
// that POST /abort_request can end them from another connection.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "sched/generation.h"
#include "server/event_queue.h"

namespace mlaserve::server {

class RequestRegistry {
 public:
  struct Entry {
    std::weak_ptr<EventQueue> queue;
    std::vector<std::pair<size_t, uint64_t>> choices;  // choice index, engine id
  };

  // Claims `rid` for a request whose events go to `queue`; false when it is already in flight.
  bool reserve(const std::string& rid, std::weak_ptr<EventQueue> queue);
  // Records that choice `choice` of request `rid` runs as engine request `engine_id`.
  void attach(const std::string& rid, size_t choice, uint64_t engine_id);
  void remove(const std::string& rid);

  // Aborts the request's engine requests and also tells its handler directly, so the client
  // gets finish reason "abort" whether or not the engine reports it. Returns false if unknown.
  bool abort(const std::string& rid, sched::EngineHandle& engine);
  size_t abort_all(sched::EngineHandle& engine);

 private:
  static void abort_entry(const Entry& entry, sched::EngineHandle& engine);

  mutable std::mutex mutex_;
  std::map<std::string, Entry> entries_;
};

}  // namespace mlaserve::server
