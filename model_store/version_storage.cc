#include "model_store/version_storage.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "model_store/s3/s3_client.h"
#include "model_store/source.h"
#include "runtime/bundle/bundle.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

constexpr const char* kListingSuffix = ".lockstep-s3-listing";

struct S3Version {
  S3Location location;
  std::string name;  // the version's directory name under the prefix ("7", or "007")
};

// The versions under an S3 prefix, each with the name it is stored under (the fewest leading
// zeros where several name one version, as for a local directory).
StatusOr<std::map<int64_t, std::string>> ListS3Versions(const S3Location& location, const StorageOptions& options) {
  LS_RETURN_IF_ERROR(options.s3_settings_status);
  const S3Client client(options.s3);
  LS_ASSIGN_OR_RETURN(const S3Listing listing, client.List(location.bucket, location.prefix, "/"));
  std::map<int64_t, std::string> versions;
  for (const std::string& prefix : listing.prefixes) {
    std::string name = prefix.substr(location.prefix.size());
    if (!name.empty() && name.back() == '/') name.pop_back();
    const std::optional<int64_t> version = ParseVersionDirName(name);
    if (!version) continue;
    auto [it, inserted] = versions.try_emplace(*version, name);
    if (!inserted && name.size() < it->second.size()) it->second = name;
  }
  return versions;
}

StatusOr<S3Version> FindS3Version(const std::string& base_path, int64_t version, const StorageOptions& options) {
  LS_ASSIGN_OR_RETURN(S3Location location, ParseS3Url(base_path));
  LS_ASSIGN_OR_RETURN(const auto versions, ListS3Versions(location, options));
  const auto it = versions.find(version);
  if (it == versions.end()) return NotFound(location.Url() + ": version " + std::to_string(version) + " is gone");
  return S3Version{std::move(location), it->second};
}

// The version's objects, keys relative to its directory; a key that leaves it is refused.
StatusOr<std::vector<S3Object>> VersionObjects(const S3Version& v, const StorageOptions& options) {
  const std::string prefix = v.location.prefix + v.name + "/";
  LS_ASSIGN_OR_RETURN(S3Listing listing, S3Client(options.s3).List(v.location.bucket, prefix, ""));
  std::vector<S3Object> objects;
  for (S3Object& o : listing.objects) {
    std::string relative = o.key.substr(prefix.size());
    if (relative.empty() || relative.back() == '/') continue;  // a "directory" placeholder
    const fs::path path = fs::path(relative).lexically_normal();
    if (path.is_absolute() || path.empty() || *path.begin() == "..") {
      return InvalidArgument("s3://" + v.location.bucket + "/" + o.key + ": a key outside its version's directory");
    }
    objects.push_back(std::move(o));
  }
  if (objects.empty()) {
    return NotFound("s3://" + v.location.bucket + "/" + prefix + ": the version has no objects");
  }
  return objects;
}

std::string ListingText(const std::vector<S3Object>& objects) {
  std::string text;
  for (const S3Object& o : objects) text += o.key + "\t" + std::to_string(o.size) + "\t" + o.etag + "\n";
  return text;
}

std::string ReadSmallFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

fs::path CacheDirOf(const S3Location& location, const StorageOptions& options) {
  return options.cache_dir / location.bucket / location.prefix;
}

}  // namespace

void PruneCachedVersions(const std::string& base_path, const std::set<int64_t>& keep, const StorageOptions& options) {
  if (!IsS3Url(base_path)) return;
  StatusOr<S3Location> location = ParseS3Url(base_path);
  if (!location.ok()) return;
  const fs::path dir = CacheDirOf(*location, options);
  const std::string ours = ".download-" + std::to_string(::getpid()) + "-";
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t download = name.find(".download-");
    if (download != std::string::npos) {
      if (name.find(ours) == std::string::npos) doomed.push_back(it->path());  // a dead process's
      continue;
    }
    std::string version_name = name;
    const size_t suffix = name.find(kListingSuffix);
    if (suffix != std::string::npos) version_name = name.substr(0, suffix);
    const std::optional<int64_t> version = ParseVersionDirName(version_name);
    if (version && !keep.contains(*version)) doomed.push_back(it->path());
  }
  for (const fs::path& path : doomed) {
    const auto removed = fs::remove_all(path, ec);
    if (removed > 1) spdlog::info("event=s3_version_uncached path={}", path.string());
  }
}

StatusOr<std::vector<int64_t>> ListStoredVersions(const std::string& base_path, const StorageOptions& options) {
  if (!IsS3Url(base_path)) return ListVersions(base_path);
  LS_ASSIGN_OR_RETURN(const S3Location location, ParseS3Url(base_path));
  LS_ASSIGN_OR_RETURN(const auto versions, ListS3Versions(location, options));
  std::vector<int64_t> out;
  for (const auto& [version, name] : versions) out.push_back(version);
  return out;
}

std::string StoredVersionFingerprint(const std::string& base_path, int64_t version, const StorageOptions& options) {
  if (!IsS3Url(base_path)) return DirFingerprint(VersionDir(base_path, version));
  StatusOr<S3Version> v = FindS3Version(base_path, version, options);
  if (!v.ok()) return v.status().ToString();
  StatusOr<std::vector<S3Object>> objects = VersionObjects(*v, options);
  return objects.ok() ? ListingText(*objects) : objects.status().ToString();
}

StatusOr<FetchedVersion> FetchVersion(const std::string& base_path, int64_t version, const StorageOptions& options) {
  if (!IsS3Url(base_path)) {
    fs::path dir = VersionDir(base_path, version);
    std::string fingerprint = DirFingerprint(dir);
    return FetchedVersion{std::move(dir), std::move(fingerprint)};
  }
  LS_ASSIGN_OR_RETURN(const S3Version v, FindS3Version(base_path, version, options));
  LS_ASSIGN_OR_RETURN(const std::vector<S3Object> objects, VersionObjects(v, options));
  const std::string listing = ListingText(objects);
  const fs::path cached = CacheDirOf(v.location, options) / v.name;
  // The listing a copy was made from lies beside it, not in it: a bundle holds only the files
  // its manifest lists.
  fs::path listing_file = cached;
  listing_file += kListingSuffix;
  std::error_code ec;
  if (fs::is_directory(cached, ec) && ReadSmallFile(listing_file) == listing) return FetchedVersion{cached, listing};

  const auto start = std::chrono::steady_clock::now();
  fs::path staging = cached;
  staging += ".download-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}());
  fs::create_directories(staging, ec);
  if (ec) return DataLoss("cannot make " + staging.string() + ": " + ec.message());
  const S3Client client(options.s3);
  const std::string prefix = v.location.prefix + v.name + "/";
  int64_t bytes = 0;
  for (const S3Object& o : objects) {
    const Status got = client.Download(v.location.bucket, o, staging / o.key.substr(prefix.size()));
    if (!got.ok()) {
      fs::remove_all(staging, ec);
      return got;
    }
    bytes += o.size;
  }
  // Another listing's copy goes; this one takes its place whole, and then its listing.
  fs::remove(listing_file, ec);
  fs::remove_all(cached, ec);
  fs::rename(staging, cached, ec);
  if (ec) {
    fs::remove_all(staging, ec);
    return DataLoss("cannot move the download into " + cached.string() + ": " + ec.message());
  }
  {
    std::ofstream out(listing_file, std::ios::binary);
    out << listing;
    if (!out) return DataLoss("cannot write " + listing_file.string());
  }
  spdlog::info("event=s3_version_fetched url={}{} objects={} bytes={} seconds={:.3f}", v.location.Url(), v.name,
               objects.size(), bytes,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return FetchedVersion{cached, listing};
}

namespace {

// The file whose arrival makes the version whole, for each format a version directory can have.
std::string CompletingFile(const fs::path& dir) {
  // In DetectModelFormat's order (runtime/model_dir.h): what makes the directory its format.
  for (const std::string_view name : {std::string_view("saved_model.pb"), std::string_view("model.onnx"), kBundleManifestFile}) {
    if (fs::is_regular_file(dir / name)) return std::string(name);
  }
  return "";
}

// The version directory's regular files, relative to it, sorted, the completing file last.
StatusOr<std::vector<std::string>> PublishOrder(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return NotFound(dir.string() + ": not a directory");
  std::vector<std::string> files;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_symlink(ec)) return InvalidArgument(it->path().string() + ": a link (publish only plain files)");
    if (it->is_regular_file(ec)) files.push_back(fs::relative(it->path(), dir).generic_string());
  }
  if (ec) return DataLoss("reading " + dir.string() + ": " + ec.message());
  if (files.empty()) return InvalidArgument(dir.string() + ": no files to publish");
  std::sort(files.begin(), files.end());
  const std::string last = CompletingFile(dir);
  std::stable_partition(files.begin(), files.end(), [&](const std::string& f) { return f != last; });
  return files;
}

StatusOr<int64_t> PublishLocal(const fs::path& dir, const fs::path& base, int64_t version,
                               const std::vector<std::string>& files) {
  std::error_code ec;
  fs::create_directories(base, ec);
  if (ec) return FailedPrecondition(base.string() + ": " + ec.message());
  LS_ASSIGN_OR_RETURN(const std::vector<int64_t> versions, ListVersions(base));
  if (version == 0) version = versions.empty() ? 1 : versions.back() + 1;
  const fs::path target = base / std::to_string(version);
  if (std::find(versions.begin(), versions.end(), version) != versions.end()) {
    return AlreadyExists(target.string() + ": the version exists");
  }
  const fs::path staging = base / ("." + std::to_string(version) + ".publish-" + std::to_string(::getpid()));
  fs::remove_all(staging, ec);
  for (const std::string& file : files) {
    fs::create_directories((staging / file).parent_path(), ec);
    if (!ec) fs::copy_file(dir / file, staging / file, ec);
    if (ec) {
      const std::string why = ec.message();
      fs::remove_all(staging, ec);
      return DataLoss("copying " + (dir / file).string() + " into " + staging.string() + ": " + why);
    }
  }
  // rename() onto an existing empty directory would succeed: a version made meanwhile is kept.
  if (fs::exists(target, ec)) {
    fs::remove_all(staging, ec);
    return AlreadyExists(target.string() + ": the version exists");
  }
  fs::rename(staging, target, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove_all(staging, ec);
    return DataLoss("renaming " + staging.string() + " to " + target.string() + ": " + why);
  }
  return version;
}

StatusOr<int64_t> PublishS3(const fs::path& dir, const std::string& base_path, int64_t version,
                            const std::vector<std::string>& files, const StorageOptions& options) {
  LS_ASSIGN_OR_RETURN(const S3Location location, ParseS3Url(base_path));
  LS_RETURN_IF_ERROR(options.s3_settings_status);
  LS_ASSIGN_OR_RETURN(const auto versions, ListS3Versions(location, options));
  if (version == 0) version = versions.empty() ? 1 : versions.rbegin()->first + 1;
  const std::string prefix = location.prefix + std::to_string(version) + "/";
  if (versions.contains(version)) {
    return AlreadyExists(location.Url() + std::to_string(version) + "/: the version exists");
  }
  const S3Client client(options.s3);
  const auto start = std::chrono::steady_clock::now();
  int64_t bytes = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const Status put = client.Upload(location.bucket, prefix + files[i], dir / files[i]);
    if (!put.ok()) {
      // This one too, last first: its PUT may have been stored with its answer lost.
      for (size_t j = i + 1; j-- > 0;) (void)client.Delete(location.bucket, prefix + files[j]);
      return put;
    }
    std::error_code ec;
    bytes += static_cast<int64_t>(fs::file_size(dir / files[i], ec));
  }
  spdlog::info("event=s3_version_published url={}{} objects={} bytes={} seconds={:.3f}", location.Url(), version,
               files.size(), bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return version;
}

}  // namespace

StatusOr<int64_t> PublishVersion(const fs::path& dir, const std::string& base_path, int64_t version,
                                 const StorageOptions& options) {
  if (version < 0) return InvalidArgument("version " + std::to_string(version) + ": must be >= 1");
  LS_ASSIGN_OR_RETURN(const std::vector<std::string> files, PublishOrder(dir));
  if (IsS3Url(base_path)) return PublishS3(dir, base_path, version, files, options);
  return PublishLocal(dir, base_path, version, files);
}

}  // namespace lockstep
