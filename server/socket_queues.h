// What the kernel still holds to send on the connections a server accepted on one TCP port,
// read from /proc/net/tcp and /proc/net/tcp6 (the tx_queue column).
//
// Why a drain needs it: gRPC counts an answer sent once its bytes are in the kernel. If the
// process then exits, its sockets close with the clients' flow-control updates unread, and a
// socket closed with unread input is reset, which throws away every byte it had yet to send:
// a slow reader loses its last answers. So the drain waits, up to its deadline, until the
// clients' kernels have taken every byte (tests/e2e/lifecycle_test.cc, StreamDrainTest).
#pragma once

#include <cstdint>
#include <string_view>

#include "runtime/status.h"

namespace lockstep {

// Bytes queued to send on the connections whose local port is `port`, summed over the text of
// a /proc/net/tcp-format table. Lines that do not parse are skipped.
uint64_t UnsentBytesOnPort(std::string_view proc_net_tcp, int port);

// The same over this process's network namespace, IPv4 and IPv6. An error where neither table
// can be read (no /proc): the caller cannot wait on it.
StatusOr<uint64_t> UnsentBytesOnPort(int port);

}  // namespace lockstep
