// The Responses API's stored responses (store: true, the default): GET /v1/responses/{id} reads
// one back, previous_response_id continues its conversation, DELETE removes it. Kept in memory
// and bounded: past kCapacity responses the oldest is dropped (a later request naming it gets
// a 404), and past kCapacityBytes of stored JSON text the oldest go too (the newest always
// stays). Thread-safe: handler
// threads store and read at once.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace mlaserve::server {

struct StoredResponse {
  nlohmann::json response;  // the response object as returned
  // The conversation it ends (chat messages, its instructions left out as the Responses API
  // does not carry them over): what a request naming it as previous_response_id continues.
  nlohmann::ordered_json conversation;
  nlohmann::json input_items;  // the request's input as items with ids (GET .../input_items)
};

class ResponseStore {
 public:
  static constexpr size_t kCapacity = 1024;
  static constexpr size_t kCapacityBytes = size_t{256} << 20;

  explicit ResponseStore(size_t capacity = kCapacity, size_t capacity_bytes = kCapacityBytes)
      : capacity_(capacity), capacity_bytes_(capacity_bytes) {}

  void put(const std::string& id, StoredResponse stored);
  std::optional<StoredResponse> get(const std::string& id) const;
  // False if no response has that id.
  bool erase(const std::string& id);

 private:
  mutable std::mutex mutex_;
  void drop_oldest();

  const size_t capacity_, capacity_bytes_;
  std::list<std::string> order_;  // oldest first
  struct Entry {
    StoredResponse stored;
    std::list<std::string>::iterator position;
    size_t bytes;  // its JSON text's size
  };
  size_t bytes_ = 0;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace mlaserve::server
