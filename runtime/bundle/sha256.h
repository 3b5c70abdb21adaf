// SHA-256 (OpenSSL EVP) as lowercase hex, the form MANIFEST.sha256 and `sha256sum` use.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "runtime/status.h"

namespace lockstep {

inline constexpr size_t kSha256HexLength = 64;

// Incremental hashing, for data produced piecewise (the writer hashes weights as it writes
// them instead of reading the file back).
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(Sha256Hasher&&) noexcept;
  Sha256Hasher& operator=(Sha256Hasher&&) noexcept;

  void Update(std::span<const std::byte> data);
  void Update(std::string_view data) { Update(std::as_bytes(std::span(data.data(), data.size()))); }
  // The digest of everything given so far, as 64 lowercase hex digits. Ends the hasher.
  std::string FinishHex();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string Sha256Hex(std::span<const std::byte> data);
std::string Sha256Hex(std::string_view data);
// Streams the file through a fixed buffer, so a huge asset costs no memory.
StatusOr<std::string> Sha256File(const std::filesystem::path& path);

}  // namespace lockstep
