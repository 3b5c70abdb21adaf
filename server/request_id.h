// Request ids: what ties a client's failed request to the server's log line about it. A
// client may send its own (HTTP X-Request-Id, gRPC metadata x-request-id); otherwise the
// server makes one: a random per-process prefix and a counter, unique and cheap.
#pragma once

#include <string>
#include <string_view>

namespace lockstep {

std::string NewRequestId();

// A client's id is used only if it is short (at most 64 characters) and printable ASCII
// without spaces or quotes, so it can go into a header and a log line as it is.
bool IsUsableRequestId(std::string_view id);

}  // namespace lockstep
