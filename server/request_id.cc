#include "server/request_id.h"

#include <fmt/format.h>

#include <atomic>
#include <random>

namespace lockstep {

namespace {

constexpr size_t kMaxClientRequestIdLength = 64;

const std::string& ProcessPrefix() {
  static const std::string prefix = [] {
    std::random_device random;
    return fmt::format("{:08x}", random());
  }();
  return prefix;
}

}  // namespace

std::string NewRequestId() {
  static std::atomic<uint64_t> next{1};
  return fmt::format("{}-{:x}", ProcessPrefix(), next.fetch_add(1, std::memory_order_relaxed));
}

bool IsUsableRequestId(std::string_view id) {
  if (id.empty() || id.size() > kMaxClientRequestIdLength) return false;
  for (char c : id) {
    if (c <= ' ' || c > '~' || c == '"') return false;
  }
  return true;
}

}  // namespace lockstep
