#include "server/socket_queues.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace lockstep {
namespace {

TEST(SocketQueuesTest, SumsTheSendQueuesOfConnectionsOnThePort) {
  // Port 0x9C41 = 40001: listening (nothing to send), two connections with bytes queued, one
  // closed (TIME_WAIT, 06: nothing it can send); then another port, an IPv6 line and noise.
  const std::string table =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 00000000:9C41 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1\n"
      "   1: 0100007F:9C41 0100007F:D2F4 01 00001000:00000020 01:00000014 00000000  1000        0 2 1\n"
      "   2: 0100007F:9C41 0100007F:D2F6 08 00000234:00000000 01:00000014 00000000  1000        0 3 1\n"
      "   3: 0100007F:9C41 0100007F:D2F8 06 00000999:00000000 03:00000014 00000000     0        0 0 3\n"
      "   4: 0100007F:9C42 0100007F:D2FA 01 00005000:00000000 01:00000014 00000000  1000        0 4 1\n"
      "   5: 00000000000000000000000001000000:9C41 00000000000000000000000001000000:D300 01 00000010:00000000 "
      "00:00000000 00000000  1000        0 5 1\n"
      "   6: not a line\n";
  EXPECT_EQ(UnsentBytesOnPort(table, 40001), 0x1000u + 0x234u + 0x10u);
  EXPECT_EQ(UnsentBytesOnPort(table, 40002), 0x5000u);
  EXPECT_EQ(UnsentBytesOnPort(table, 40003), 0u);
  EXPECT_EQ(UnsentBytesOnPort("", 40001), 0u);
}

// A real connection on 127.0.0.1: bytes written to a client that reads none stay queued, and
// once the client has read them the queue is empty.
TEST(SocketQueuesTest, SeesWhatAClientHasNotYetTaken) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  const int accepted = ::accept(listener, nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  // A small receive buffer on the client, so that the server's kernel keeps what it cannot take.
  const int small = 4096;
  ASSERT_EQ(::setsockopt(client, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
  const std::vector<char> bytes(size_t{1} << 20, 'x');
  size_t written = 0;
  ::setsockopt(accepted, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  const timeval timeout{0, 200000};
  ::setsockopt(accepted, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  for (ssize_t n; (n = ::send(accepted, bytes.data(), bytes.size() - written, MSG_NOSIGNAL)) > 0;) {
    written += static_cast<size_t>(n);
    if (written == bytes.size()) break;
  }
  ASSERT_GT(written, 0u);
  auto unsent = UnsentBytesOnPort(port);
  ASSERT_TRUE(unsent.ok()) << unsent.status().ToString();
  EXPECT_GT(*unsent, 0u);

  std::vector<char> sink(size_t{1} << 20);
  size_t read = 0;
  while (read < written) {
    const ssize_t n = ::recv(client, sink.data(), sink.size(), 0);
    ASSERT_GT(n, 0);
    read += static_cast<size_t>(n);
  }
  // The last ACK may trail the read by a moment.
  for (int i = 0; i < 100 && *UnsentBytesOnPort(port) > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(*UnsentBytesOnPort(port), 0u);
  ::close(accepted);
  ::close(client);
  ::close(listener);
}

}  // namespace
}  // namespace lockstep
