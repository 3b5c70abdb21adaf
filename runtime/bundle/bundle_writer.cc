// WriteBundle: build the whole bundle in a temporary sibling directory, make it durable, then
// rename it into place, so a reader (the model server polls the base path) sees either no
// bundle or a complete one.
#include <fcntl.h>
#include <stdio.h>  // renameat2
#include <sys/stat.h>

#include <cerrno>
#include <random>
#include <set>
#include <system_error>

#include <spdlog/spdlog.h>

#include "runtime/bundle/bundle.h"
#include "runtime/bundle/file_io.h"
#include "runtime/bundle/limits.h"
#include "runtime/bundle/manifest.h"
#include "runtime/bundle/sha256.h"
#include "runtime/bundle/temporaries.h"
#include "runtime/bundle/weights_file.h"
#include "runtime/graph_analysis.h"
#include "runtime/graph_proto.h"

namespace lockstep {

namespace fs = std::filesystem;

namespace {

std::string RandomSuffix() {
  std::random_device rd;
  std::uniform_int_distribution<uint64_t> dist;
  static constexpr char kHex[] = "0123456789abcdef";
  uint64_t v = dist(rd);
  std::string out;
  for (int i = 0; i < 16; ++i, v >>= 4) out.push_back(kHex[v & 0xf]);
  return out;
}

// A hidden name beside the destination. It starts with '.', so it is never all digits: the
// model server treats directories named by positive integers as versions and must not try to
// load one that is still being written. The name part is cut so the result stays under
// NAME_MAX (255).
fs::path SiblingName(const fs::path& dest, std::string_view kind) {
  std::string name = ".";
  name.append(kind).append("-").append(dest.filename().string().substr(0, 128));
  name.append("-").append(RandomSuffix());
  return dest.parent_path() / name;
}

// Removes the temporary directory on every path out of WriteBundle, unless it was renamed
// into place.
class TempDir {
 public:
  explicit TempDir(fs::path path) : path_(std::move(path)) {}
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
    if (ec) spdlog::warn("could not remove temporary bundle directory {}: {}", path_.string(), ec.message());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const { return path_; }
  void Release() { path_.clear(); }

 private:
  fs::path path_;
};

Status WriteWholeFile(const fs::path& path, std::string_view contents) {
  LS_ASSIGN_OR_RETURN(WritableFile file, WritableFile::Create(path));
  LS_RETURN_IF_ERROR(file.Append(contents));
  LS_RETURN_IF_ERROR(file.Sync());
  return file.Close();
}

Status WriteModelProto(const Model& model, proto::BundleDef& def, const fs::path& path, std::string* sha256) {
  def.set_format_version(kBundleFormatVersion);
  GraphToProto(model.graph, &def);
  const size_t bytes = def.ByteSizeLong();
  if (bytes > kMaxModelProtoBytes) {
    return InvalidArgument(std::string(kBundleGraphFile) + " would be " + std::to_string(bytes) +
                           " bytes; readers refuse more than " + std::to_string(kMaxModelProtoBytes));
  }
  std::string serialized;
  if (!def.SerializeToString(&serialized)) return Internal("cannot serialize " + std::string(kBundleGraphFile));
  // protobuf writes a string field that is not UTF-8 but refuses to parse it back; finding out
  // now beats writing a bundle nobody can read.
  proto::BundleDef check;
  if (!check.ParseFromString(serialized)) {
    return InvalidArgument("the graph, signatures, metadata or weight names contain a string that is not valid "
                           "UTF-8, which " + std::string(kBundleGraphFile) + " cannot store");
  }
  *sha256 = Sha256Hex(serialized);
  return WriteWholeFile(path, serialized);
}

// Writes everything into `root` (the temporary directory) and makes it durable.
Status WriteContents(const Model& model, const fs::path& root, const BundleWriteOptions& options) {
  std::vector<ManifestEntry> manifest;
  proto::BundleDef def;

  LS_ASSIGN_OR_RETURN(manifest, WriteWeights(model.weights, root, options.weight_shard_bytes, &def));
  {
    std::string sha256;
    const fs::path path = root / kBundleGraphFile;
    LS_RETURN_IF_ERROR(WriteModelProto(model, def, path, &sha256).WithPrefix(path.string()));
    manifest.push_back({std::move(sha256), std::string(kBundleGraphFile)});
  }
  for (const auto& [subdir, files] : {std::pair{kBundleAssetsDir, &options.assets},
                                      std::pair{kBundleExtrasDir, &options.extras}}) {
    if (files->empty()) continue;
    std::set<fs::path> dirs{root / subdir};
    for (const auto& [rel, contents] : *files) {
      const fs::path path = root / subdir / rel;
      std::error_code ec;
      fs::create_directories(path.parent_path(), ec);
      if (ec) return Internal("cannot create directory " + path.parent_path().string() + ": " + ec.message());
      for (fs::path d = path.parent_path(); d != root; d = d.parent_path()) dirs.insert(d);
      LS_RETURN_IF_ERROR(WriteWholeFile(path, contents));
      manifest.push_back({Sha256Hex(contents), std::string(subdir) + "/" + rel});
    }
    for (const fs::path& d : dirs) LS_RETURN_IF_ERROR(SyncDirectory(d));
  }
  LS_RETURN_IF_ERROR(WriteWholeFile(root / kBundleManifestFile, FormatManifest(std::move(manifest))));
  return SyncDirectory(root);
}

bool RenameFlagUnsupported(int err) { return err == EINVAL || err == ENOSYS || err == ENOTSUP; }

// Moves the finished bundle to `dest`. renameat2 makes both cases atomic on Linux: NOREPLACE
// refuses to clobber a bundle that appeared meanwhile (plain rename would silently replace an
// empty directory), EXCHANGE swaps old and new in one step. File systems without these flags
// get the plain-rename fallback.
Status MoveIntoPlace(TempDir& tmp, const fs::path& dest, bool dest_exists) {
  if (!dest_exists) {
    int rc = ::renameat2(AT_FDCWD, tmp.path().c_str(), AT_FDCWD, dest.c_str(), RENAME_NOREPLACE);
    if (rc != 0 && RenameFlagUnsupported(errno)) {
      std::error_code ec;
      if (fs::exists(fs::symlink_status(dest, ec))) return AlreadyExists(dest.string() + " appeared while writing");
      rc = ::rename(tmp.path().c_str(), dest.c_str());
    }
    if (rc != 0) {
      if (errno == EEXIST || errno == ENOTEMPTY) return AlreadyExists(dest.string() + " appeared while writing");
      return ErrnoStatus(errno, "cannot rename " + tmp.path().string() + " to", dest);
    }
    tmp.Release();
    return Status::Ok();
  }

  // After the exchange the temporary path holds the old bundle, which TempDir then removes.
  int rc = ::renameat2(AT_FDCWD, tmp.path().c_str(), AT_FDCWD, dest.c_str(), RENAME_EXCHANGE);
  if (rc == 0) return Status::Ok();
  if (!RenameFlagUnsupported(errno)) return ErrnoStatus(errno, "cannot exchange " + tmp.path().string() + " with", dest);

  const fs::path old = SiblingName(dest, "old");
  if (::rename(dest.c_str(), old.c_str()) != 0) return ErrnoStatus(errno, "cannot move the old bundle away from", dest);
  if (::rename(tmp.path().c_str(), dest.c_str()) != 0) {
    Status s = ErrnoStatus(errno, "cannot rename " + tmp.path().string() + " to", dest);
    if (::rename(old.c_str(), dest.c_str()) != 0) {
      spdlog::error("could not restore the old bundle {} from {}", dest.string(), old.string());
    }
    return s;
  }
  tmp.Release();
  std::error_code ec;
  fs::remove_all(old, ec);
  if (ec) spdlog::warn("could not remove the replaced bundle {}: {}", old.string(), ec.message());
  return Status::Ok();
}

Status WriteBundleImpl(const Model& model, const fs::path& dest, const BundleWriteOptions& options) {
  if (model.per_input != nullptr) {
    return FailedPrecondition("the model's graph is made per input shape when it runs (runtime/onnx/onnx_per_input.h), "
                              "so there is no one graph to write: serve its model.onnx as it is");
  }
  auto analysis = AnalyzeGraph(model);
  if (!analysis.ok()) return analysis.status().WithPrefix("invalid model");
  // Checked as the manifest will list them, so the writer never makes what the reader refuses.
  for (const auto& [rel, contents] : options.assets) {
    LS_RETURN_IF_ERROR(CheckBundlePath(std::string(kBundleAssetsDir) + "/" + rel).WithPrefix("asset"));
  }
  for (const auto& [rel, contents] : options.extras) {
    LS_RETURN_IF_ERROR(CheckBundlePath(std::string(kBundleExtrasDir) + "/" + rel).WithPrefix("extra file"));
  }

  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dest, ec);
  const bool dest_exists = fs::exists(st);
  if (dest_exists && !options.overwrite) return AlreadyExists("it already exists (set overwrite to replace it)");
  const fs::path parent = dest.parent_path();
  fs::create_directories(parent, ec);
  if (ec) return Internal("cannot create parent directory " + parent.string() + ": " + ec.message());

  // What writers that died left here goes first (temporaries.h); this writer's own temporary
  // is locked until it is renamed into place or removed (TempDir goes before the lock).
  RemoveStaleTemporaries(parent);
  fs::path tmp_path = SiblingName(dest, "tmp");
  LS_ASSIGN_OR_RETURN(LockedTemporaryDir locked, LockedTemporaryDir::Create(tmp_path));
  TempDir tmp(tmp_path);
  LS_RETURN_IF_ERROR(WriteContents(model, tmp.path(), options));
  LS_RETURN_IF_ERROR(MoveIntoPlace(tmp, dest, dest_exists));
  // The rename is only durable once the parent directory is.
  return SyncDirectory(parent);
}

}  // namespace

Status WriteBundle(const Model& model, const fs::path& dir, const BundleWriteOptions& options) {
  // "a/b/" names the same directory as "a/b", but its filename() is empty.
  fs::path dest = dir.lexically_normal();
  if (!dest.has_filename() && dest.has_relative_path()) dest = dest.parent_path();
  if (!dest.has_filename() || dest.filename() == "." || dest.filename() == "..") {
    return InvalidArgument("cannot write bundle " + dir.string() + ": not a usable directory name");
  }
  if (dest.is_relative()) dest = fs::path(".") / dest;  // so parent_path() is never empty

  Status s = WriteBundleImpl(model, dest, options);
  if (!s.ok()) return s.WithPrefix("cannot write bundle " + dir.string());
  spdlog::info("wrote bundle {} ({} nodes, {} weights)", dir.string(), model.graph.nodes.size(),
               model.weights.size());
  return Status::Ok();
}

}  // namespace lockstep
