#include "server/socket_queues.h"

#include <fstream>
#include <sstream>
#include <string>

namespace lockstep {

namespace {

// Kernel states (include/net/tcp_states.h) in which a socket may still hold bytes to send.
bool MaySend(unsigned state) {
  constexpr unsigned kEstablished = 0x01, kFinWait1 = 0x04, kCloseWait = 0x08, kLastAck = 0x09, kClosing = 0x0B;
  return state == kEstablished || state == kFinWait1 || state == kCloseWait || state == kLastAck || state == kClosing;
}

}  // namespace

uint64_t UnsentBytesOnPort(std::string_view proc_net_tcp, int port) {
  uint64_t unsent = 0;
  std::istringstream lines{std::string(proc_net_tcp)};
  std::string line;
  std::getline(lines, line);  // the header
  while (std::getline(lines, line)) {
    // "  0: 0100007F:9C41 0100007F:D2F4 01 00000000:00000000 ...": slot, local, remote, state,
    // tx_queue:rx_queue, all hex.
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues;
    if (!(fields >> slot >> local >> remote >> state >> queues)) continue;
    const size_t colon = local.rfind(':');
    const size_t queue_colon = queues.find(':');
    if (colon == std::string::npos || queue_colon == std::string::npos) continue;
    try {
      if (std::stoi(local.substr(colon + 1), nullptr, 16) != port) continue;
      if (!MaySend(static_cast<unsigned>(std::stoul(state, nullptr, 16)))) continue;
      unsent += std::stoull(queues.substr(0, queue_colon), nullptr, 16);
    } catch (const std::exception&) {
      continue;  // not a table line
    }
  }
  return unsent;
}

StatusOr<uint64_t> UnsentBytesOnPort(int port) {
  uint64_t unsent = 0;
  bool read_any = false;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    if (!in) continue;
    std::ostringstream text;
    text << in.rdbuf();
    unsent += UnsentBytesOnPort(text.str(), port);
    read_any = true;
  }
  if (!read_any) return FailedPrecondition("cannot read /proc/net/tcp or /proc/net/tcp6");
  return unsent;
}

}  // namespace lockstep
