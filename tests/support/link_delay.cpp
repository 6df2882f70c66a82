// mlaserve_link_delay IFACE_A IFACE_B MS: forwards every Ethernet frame that arrives on one
// interface out of the other, MS milliseconds later, both ways: a cable with latency, for
// scripts/multihost.sh on kernels without tc's netem. Runs until killed.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Frame {
  Clock::time_point due;
  std::vector<char> bytes;
};

// A raw socket that receives every frame arriving on `iface` (not those sent from it).
int open_interface(const char* iface) {
  const int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
  if (fd < 0) return -1;
  sockaddr_ll addr{};
  addr.sll_family = AF_PACKET;
  addr.sll_protocol = htons(ETH_P_ALL);
  addr.sll_ifindex = static_cast<int>(if_nametoindex(iface));
  const int ignore_outgoing = 1;
  if (addr.sll_ifindex == 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &ignore_outgoing,
                 sizeof(ignore_outgoing)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The Internet checksum's one's-complement sum of `n` bytes, added to `sum`.
uint32_t add_ones_complement(const unsigned char* p, size_t n, uint32_t sum) {
  for (; n > 1; p += 2, n -= 2) sum += static_cast<uint32_t>(p[0] << 8 | p[1]);
  if (n == 1) sum += static_cast<uint32_t>(p[0] << 8);
  return sum;
}

// Frames of a veth carry TCP and UDP checksums left for the "hardware" to fill in (checksum
// offload); relayed as raw frames they would be dropped as corrupt, so every IPv4 TCP/UDP
// checksum is computed here.
void fill_transport_checksum(std::vector<char>& frame) {
  auto* bytes = reinterpret_cast<unsigned char*>(frame.data());
  constexpr size_t kEth = 14;
  if (frame.size() < kEth + 20 || bytes[12] != 0x08 || bytes[13] != 0x00) return;  // IPv4
  unsigned char* ip = bytes + kEth;
  const size_t ip_header = (ip[0] & 0x0f) * 4u;
  const size_t ip_total = static_cast<size_t>(ip[2] << 8 | ip[3]);
  const int protocol = ip[9];
  const bool fragment = ((ip[6] & 0x3f) | ip[7]) != 0;
  if (fragment || ip_total > frame.size() - kEth || ip_total < ip_header) return;
  const size_t segment = ip_total - ip_header;
  const size_t field = protocol == IPPROTO_TCP ? 16 : protocol == IPPROTO_UDP ? 6 : 0;
  if (field == 0 || segment < field + 2) return;
  unsigned char* l4 = ip + ip_header;
  l4[field] = l4[field + 1] = 0;
  uint32_t sum = add_ones_complement(ip + 12, 8, 0);  // source and destination addresses
  sum += static_cast<uint32_t>(protocol) + static_cast<uint32_t>(segment);
  sum = add_ones_complement(l4, segment, sum);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  uint16_t checksum = static_cast<uint16_t>(~sum);
  if (protocol == IPPROTO_UDP && checksum == 0) checksum = 0xffff;
  l4[field] = static_cast<unsigned char>(checksum >> 8);
  l4[field + 1] = static_cast<unsigned char>(checksum & 0xff);
}

int fail(const std::string& what) {
  std::fprintf(stderr, "mlaserve_link_delay: %s: %s\n", what.c_str(), std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: mlaserve_link_delay IFACE_A IFACE_B MILLISECONDS\n");
    return 2;
  }
  const int fds[2] = {open_interface(argv[1]), open_interface(argv[2])};
  if (fds[0] < 0) return fail(argv[1]);
  if (fds[1] < 0) return fail(argv[2]);
  const auto delay = std::chrono::milliseconds(std::atoi(argv[3]));
  std::deque<Frame> queues[2];  // queues[i]: frames from side i, due out of the other side
  std::vector<char> buffer(65536);
  for (;;) {
    // Sleep until a frame arrives or the earliest queued frame is due.
    int timeout_ms = -1;
    for (const auto& q : queues) {
      if (q.empty()) continue;
      const auto wait =
          std::chrono::ceil<std::chrono::milliseconds>(q.front().due - Clock::now()).count();
      const int ms = static_cast<int>(std::max<long long>(0, wait));
      timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
    }
    pollfd polls[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    if (poll(polls, 2, timeout_ms) < 0 && errno != EINTR) return fail("poll");
    for (int side = 0; side < 2; ++side) {
      if (!(polls[side].revents & POLLIN)) continue;
      const ssize_t n = recv(fds[side], buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (n <= 0) continue;
      Frame frame{Clock::now() + delay, {buffer.begin(), buffer.begin() + n}};
      fill_transport_checksum(frame.bytes);
      queues[side].push_back(std::move(frame));
    }
    const auto now = Clock::now();
    for (int side = 0; side < 2; ++side) {
      while (!queues[side].empty() && queues[side].front().due <= now) {
        const std::vector<char>& frame = queues[side].front().bytes;
        send(fds[1 - side], frame.data(), frame.size(), 0);  // a frame lost here is a lost frame
        queues[side].pop_front();
      }
    }
  }
}
