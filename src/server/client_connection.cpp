#include "server/client_connection.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>

namespace mlaserve::server {

namespace {

struct Endpoint {
  std::string address;
  int port = -1;
};

// Formats like cpp-httplib does (numeric host), so the strings compare equal.
bool to_endpoint(const sockaddr_storage& address, socklen_t length, Endpoint& out) {
  char host[NI_MAXHOST];
  char service[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host, sizeof host, service,
                  sizeof service, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  out = {host, std::atoi(service)};
  return true;
}

bool local_endpoint(int fd, Endpoint& out) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  return getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0 &&
         to_endpoint(address, length, out);
}

bool peer_endpoint(int fd, Endpoint& out) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  return getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0 &&
         to_endpoint(address, length, out);
}

bool is_connection_of(int fd, const httplib::Request& request) {
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISSOCK(info.st_mode)) return false;
  Endpoint local;
  Endpoint peer;
  return local_endpoint(fd, local) && local.port == request.local_port &&
         local.address == request.local_addr && peer_endpoint(fd, peer) &&
         peer.port == request.remote_port && peer.address == request.remote_addr;
}

}  // namespace

ClientConnection ClientConnection::of(const httplib::Request& request) {
  DIR* fds = opendir("/proc/self/fd");
  if (!fds) return ClientConnection(-1);
  int found = -1;
  while (const dirent* entry = readdir(fds)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(fds)) continue;
    if (is_connection_of(static_cast<int>(fd), request)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(fds);
  return ClientConnection(found);
}

bool ClientConnection::closed() const {
  if (fd_ < 0) return false;
  pollfd watched{fd_, POLLRDHUP, 0};
  if (poll(&watched, 1, 0) <= 0) return false;
  return (watched.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace mlaserve::server
