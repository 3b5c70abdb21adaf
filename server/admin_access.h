// Who may run admin operations (HandleReloadConfigRequest): by default only peers on the
// loopback interface (the host itself, a sidecar); with --admin_token_file, any peer that sends
// the token as "authorization: Bearer <token>" metadata, and no other (loopback included: a
// token, once set, is the policy).
#pragma once

#include <string>
#include <string_view>

#include "runtime/status.h"

namespace lockstep {

// gRPC's peer strings: "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", "ipv6:[::ffff:127.0.0.1]:5000",
// "unix:/path". Loopback addresses and Unix sockets are local.
bool IsLocalPeer(std::string_view peer);

class AdminAccess {
 public:
  // Loopback only.
  AdminAccess() = default;
  // The token in `path` (surrounding whitespace ignored); an unreadable or empty file is an
  // error naming it.
  static StatusOr<AdminAccess> WithTokenFile(const std::string& path);

  // OK, or PermissionDenied (a remote peer without a token policy) or Unauthenticated (a missing
  // or wrong token), saying what `operation` needs.
  // `origin` is a REST call's Origin header. A call with one comes from a web page, and any page
  // the host's browser opens can send a form's POST to the loopback without a CORS preflight:
  // loopback does not vouch for it, so without a token policy it is refused (PermissionDenied).
  Status Check(std::string_view operation, std::string_view peer, std::string_view authorization,
               std::string_view origin = {}) const;

 private:
  std::string token_;  // empty: loopback only
};

}  // namespace lockstep
