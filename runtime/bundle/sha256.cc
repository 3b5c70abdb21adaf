#include "runtime/bundle/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <vector>

#include <spdlog/spdlog.h>

#include "runtime/bundle/file_io.h"

namespace lockstep {

struct Sha256Hasher::Impl {
  struct CtxFree {
    void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
  };
  std::unique_ptr<EVP_MD_CTX, CtxFree> ctx{EVP_MD_CTX_new()};
};

namespace {

// EVP only fails on allocation failure or a broken OpenSSL build; neither is something a
// caller could handle, and a silently wrong digest would defeat the manifest.
void CheckEvp(int ok, const char* what) {
  if (ok != 1) {
    spdlog::critical("OpenSSL {} failed", what);
    std::abort();
  }
}

}  // namespace

Sha256Hasher::Sha256Hasher() : impl_(std::make_unique<Impl>()) {
  CheckEvp(impl_->ctx != nullptr, "EVP_MD_CTX_new");
  CheckEvp(EVP_DigestInit_ex(impl_->ctx.get(), EVP_sha256(), nullptr), "EVP_DigestInit_ex");
}

Sha256Hasher::~Sha256Hasher() = default;
Sha256Hasher::Sha256Hasher(Sha256Hasher&&) noexcept = default;
Sha256Hasher& Sha256Hasher::operator=(Sha256Hasher&&) noexcept = default;

void Sha256Hasher::Update(std::span<const std::byte> data) {
  if (data.empty()) return;
  CheckEvp(EVP_DigestUpdate(impl_->ctx.get(), data.data(), data.size()), "EVP_DigestUpdate");
}

std::string Sha256Hasher::FinishHex() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int len = 0;
  CheckEvp(EVP_DigestFinal_ex(impl_->ctx.get(), digest.data(), &len), "EVP_DigestFinal_ex");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

std::string Sha256Hex(std::span<const std::byte> data) {
  Sha256Hasher h;
  h.Update(data);
  return h.FinishHex();
}

std::string Sha256Hex(std::string_view data) { return Sha256Hex(std::as_bytes(std::span(data.data(), data.size()))); }

StatusOr<std::string> Sha256File(const std::filesystem::path& path) {
  // O_NOFOLLOW: a bundle's files are checked to be regular files before hashing; refusing
  // symlinks here too closes the window in which one could be swapped in.
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is rejected just below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path.string() + " is not a regular file");
  }
  Sha256Hasher h;
  std::vector<std::byte> buffer(1 << 20);
  Status status;
  for (;;) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      status = ErrnoStatus(errno, "cannot read", path);
      break;
    }
    if (n == 0) break;
    h.Update(std::span(buffer.data(), static_cast<size_t>(n)));
  }
  ::close(fd);
  if (!status.ok()) return status;
  return h.FinishHex();
}

}  // namespace lockstep
