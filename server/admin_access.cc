#include "server/admin_access.h"

#include <fstream>
#include <sstream>

namespace lockstep {
namespace {

// Compares without stopping at the first difference, so the time taken says nothing about how
// much of a guess was right.
bool SameSecret(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

}  // namespace

bool IsLocalPeer(std::string_view peer) {
  if (peer.rfind("unix:", 0) == 0) return true;
  if (peer.rfind("ipv4:127.", 0) == 0) return true;
  return peer.rfind("ipv6:[::1]:", 0) == 0 || peer.rfind("ipv6:[::ffff:127.", 0) == 0;
}

StatusOr<AdminAccess> AdminAccess::WithTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgument("--admin_token_file: cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  const size_t begin = token.find_first_not_of(" \t\r\n");
  const size_t end = token.find_last_not_of(" \t\r\n");
  token = begin == std::string::npos ? "" : token.substr(begin, end - begin + 1);
  if (token.empty()) return InvalidArgument("--admin_token_file: '" + path + "' holds no token");
  AdminAccess access;
  access.token_ = std::move(token);
  return access;
}

Status AdminAccess::Check(std::string_view operation, std::string_view peer, std::string_view authorization,
                          std::string_view origin) const {
  if (token_.empty()) {
    if (!origin.empty()) {
      return Status(StatusCode::kPermissionDenied,
                    std::string(operation) + " is refused from a web page (Origin: " + std::string(origin) +
                        ") unless the server has --admin_token_file");
    }
    if (IsLocalPeer(peer)) return Status::Ok();
    return Status(StatusCode::kPermissionDenied,
                  std::string(operation) +
                      " is allowed from loopback only (or with --admin_token_file); refused from " +
                      std::string(peer));
  }
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.rfind(kBearer, 0) != 0 || !SameSecret(authorization.substr(kBearer.size()), token_)) {
    return Status(StatusCode::kUnauthenticated,
                  std::string(operation) + " needs the admin token as 'authorization: Bearer <token>'");
  }
  return Status::Ok();
}

}  // namespace lockstep
