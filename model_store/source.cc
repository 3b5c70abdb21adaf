#include "model_store/source.h"

#include <sys/stat.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>
#include <system_error>

namespace lockstep {

std::optional<int64_t> ParseVersionDirName(std::string_view name) {
  while (name.size() > 1 && name[0] == '0') name.remove_prefix(1);
  if (name.empty() || name.size() > 19 || name[0] == '0') return std::nullopt;
  int64_t value = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
    const int digit = c - '0';
    if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

std::filesystem::path VersionDir(const std::filesystem::path& base_path, int64_t version) {
  const std::filesystem::path canonical = base_path / std::to_string(version);
  std::error_code ec;
  if (std::filesystem::is_directory(canonical, ec)) return canonical;
  std::filesystem::path best = canonical;
  std::string best_name;
  std::filesystem::directory_iterator it(base_path, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().native();
    if (ParseVersionDirName(name) != version) continue;
    std::error_code dir_ec;
    if (!it->is_directory(dir_ec) || dir_ec) continue;
    if (best_name.empty() || name.size() < best_name.size()) {
      best_name = name;
      best = it->path();
    }
  }
  return best;
}

StatusOr<std::vector<int64_t>> ListVersions(const std::filesystem::path& base_path) {
  std::error_code ec;
  const auto st = std::filesystem::status(base_path, ec);
  if (ec || !std::filesystem::exists(st)) {
    if (ec && ec != std::errc::no_such_file_or_directory) {
      return FailedPrecondition("cannot read base path " + base_path.string() + ": " + ec.message());
    }
    return NotFound("base path " + base_path.string() + " does not exist");
  }
  if (!std::filesystem::is_directory(st)) {
    return FailedPrecondition("base path " + base_path.string() + " is not a directory");
  }
  std::vector<int64_t> versions;
  std::filesystem::directory_iterator it(base_path, ec);
  for (; !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::optional<int64_t> v = ParseVersionDirName(it->path().filename().native());
    if (!v) continue;
    std::error_code dir_ec;
    if (!it->is_directory(dir_ec) || dir_ec) continue;  // a file named "3" is not a version
    versions.push_back(*v);
  }
  if (ec) return FailedPrecondition("cannot list base path " + base_path.string() + ": " + ec.message());
  std::sort(versions.begin(), versions.end());
  versions.erase(std::unique(versions.begin(), versions.end()), versions.end());  // "7" and "007"
  return versions;
}

namespace {
constexpr size_t kMaxFingerprintEntries = 10000;
}  // namespace

std::string DirFingerprint(const std::filesystem::path& dir) {
  std::string fp;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return "missing";
  fp += std::to_string(st.st_ino) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
        std::to_string(st.st_mtim.tv_nsec) + ";";
  std::error_code ec;
  std::vector<std::string> parts;
  std::filesystem::recursive_directory_iterator it(dir, ec);
  for (; !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (parts.size() >= kMaxFingerprintEntries) break;
    struct stat fst {};
    if (::stat(it->path().c_str(), &fst) != 0) continue;
    parts.push_back(it->path().lexically_relative(dir).string() + ":" + std::to_string(fst.st_size) + ":" +
                    std::to_string(fst.st_mtim.tv_sec) + "." + std::to_string(fst.st_mtim.tv_nsec));
  }
  std::sort(parts.begin(), parts.end());
  for (const std::string& p : parts) fp += p + ";";
  return fp;
}

int64_t DirBytes(const std::filesystem::path& dir) {
  int64_t bytes = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    if (!it->is_regular_file(size_ec)) continue;
    const uintmax_t size = it->file_size(size_ec);
    if (!size_ec) bytes += static_cast<int64_t>(size);
  }
  return bytes;
}

}  // namespace lockstep
