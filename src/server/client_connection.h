// Notices when the client of a request has gone away while its handler waits for the engine.
// cpp-httplib 0.11 gives handlers no access to the socket, so it is found by its addresses
// (local and peer address and port identify a TCP connection uniquely); a closed or reset
// connection then shows as POLLRDHUP/POLLHUP on it.
#pragma once

#include <httplib.h>

namespace mlaserve::server {

class ClientConnection {
 public:
  // The connection `request` arrived on; one that is never seen closing if it is not found.
  static ClientConnection of(const httplib::Request& request);

  // True once the client has closed (or half-closed) or reset the connection.
  bool closed() const;

 private:
  explicit ClientConnection(int fd) : fd_(fd) {}
  int fd_;  // valid while the request's handler runs: the server closes it only afterwards
};

}  // namespace mlaserve::server
