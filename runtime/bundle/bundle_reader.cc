// ReadBundle: trust nothing in the directory until it has been checked, and check in an order
// where each step may rely on the previous ones: the manifest before the files it lists, the
// checksums before the bytes are parsed, the structure of model.pb before its meaning, and
// model.pb (checked) before the weights, whose length it bounds.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <system_error>

#include <spdlog/spdlog.h>

#include "runtime/bundle/bundle.h"
#include "runtime/bundle/limits.h"
#include "runtime/bundle/manifest.h"
#include "runtime/bundle/file_image.h"
#include "runtime/bundle/file_io.h"
#include "runtime/bundle/sha256.h"
#include "runtime/bundle/weights_file.h"
#include "runtime/graph_analysis.h"
#include "runtime/graph_proto.h"

namespace lockstep {

namespace fs = std::filesystem;

namespace {

const std::string kManifest(kBundleManifestFile);
const std::string kGraph(kBundleGraphFile);

StatusOr<std::vector<ManifestEntry>> ReadManifest(const fs::path& dir) {
  const fs::path path = dir / kBundleManifestFile;
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (!fs::exists(st)) return NotFound(path.string() + " is missing");
  if (!fs::is_regular_file(st)) return DataLoss(path.string() + " is not a regular file");
  auto file = FileImage::Read(path, kMaxManifestBytes);
  if (!file.ok()) return Status(StatusCode::kDataLoss, file.status().message());
  std::string_view text(reinterpret_cast<const char*>((*file)->data()), (*file)->size());
  auto entries = ParseManifest(text);
  if (!entries.ok()) return entries.status().WithPrefix(path.string());
  std::set<std::string_view> listed;
  for (const ManifestEntry& e : *entries) listed.insert(e.path);
  if (listed.count(kGraph) == 0) return DataLoss(path.string() + " does not list " + kGraph);
  if (listed.count(kManifest) > 0) return DataLoss(path.string() + " lists itself");
  return entries;
}

Status CheckListedFilesExist(const fs::path& dir, const std::vector<ManifestEntry>& entries) {
  for (const ManifestEntry& e : entries) {
    const fs::path path = dir / e.path;
    std::error_code ec;
    // symlink_status: a listed name must be a file in the bundle, not a link to one elsewhere
    // (a hostile bundle could otherwise make us map /dev/zero or a huge file).
    const fs::file_status st = fs::symlink_status(path, ec);
    if (!fs::exists(st)) return NotFound(path.string() + " is listed in " + kManifest + " but missing");
    if (!fs::is_regular_file(st)) return DataLoss(path.string() + " is listed in " + kManifest + " but is not a regular file");
  }
  return Status::Ok();
}

// Finds any file in the bundle the manifest does not vouch for. Without this, a bundle could
// carry files (say, in assets/) that nothing ever checked.
Status CheckNoUnlistedFiles(const fs::path& dir, const std::vector<ManifestEntry>& entries) {
  std::set<std::string, std::less<>> listed;
  for (const ManifestEntry& e : entries) listed.insert(e.path);
  size_t visited = 0;
  // Explicit stack of (directory, its path relative to the bundle, depth).
  struct Pending {
    fs::path path;
    std::string rel;
    int depth;
  };
  std::vector<Pending> stack{{dir, "", 0}};
  while (!stack.empty()) {
    Pending cur = std::move(stack.back());
    stack.pop_back();
    std::error_code ec;
    for (fs::directory_iterator it(cur.path, ec), end; !ec && it != end; it.increment(ec)) {
      if (++visited > kMaxBundleEntries) {
        return DataLoss(dir.string() + " holds more than " + std::to_string(kMaxBundleEntries) + " entries");
      }
      const std::string name = it->path().filename().string();
      const std::string rel = cur.rel.empty() ? name : cur.rel + "/" + name;
      const fs::file_status st = it->symlink_status(ec);
      if (ec) break;
      if (fs::is_directory(st)) {
        if (cur.depth + 1 > kMaxBundleDepth) return DataLoss(it->path().string() + " is nested too deeply");
        stack.push_back({it->path(), rel, cur.depth + 1});
        continue;
      }
      if (rel == kManifest) continue;
      if (fs::is_symlink(st)) return DataLoss(it->path().string() + " is a symlink; a bundle holds only files");
      if (!fs::is_regular_file(st)) return DataLoss(it->path().string() + " is not a regular file");
      if (listed.count(rel) == 0) return DataLoss(it->path().string() + " is not listed in " + kManifest);
    }
    if (ec) return DataLoss("cannot list " + cur.path.string() + ": " + ec.message());
  }
  return Status::Ok();
}

Status ChecksumMismatch(const fs::path& path, const std::string& expected, const std::string& actual) {
  return DataLoss(path.string() + ": checksum mismatch: " + kManifest + " says " + expected +
                  ", the file's SHA-256 is " + actual);
}

// What the weights are called in messages: the file, or the shards end to end.
std::string WeightsName(const std::vector<std::string>& files) {
  if (files.size() == 1) return files[0];
  return "weights-*-of-" + files[0].substr(files[0].size() - 9);  // "weights-*-of-00004.bin"
}

// Where the last of model.pb's weight entries ends: the weights' length, as the writer lays
// them out. An entry past 2^64 saturates (DecodeWeights names it).
uint64_t WeightsEnd(const proto::BundleDef& def) {
  uint64_t end = 0;
  for (const proto::WeightEntry& e : def.weights()) {
    const uint64_t entry_end = e.size() > UINT64_MAX - e.offset() ? UINT64_MAX : e.offset() + e.size();
    end = std::max(end, entry_end);
  }
  return end;
}

// Reads the weight files into one image, hashing each (on its own thread, where there are
// several) as it arrives, and checks each against the manifest. Weights longer than model.pb's
// entries say are refused before a byte is read: a sparse file costs nothing to make, and
// the image would be its size.
Status ReadWeights(const fs::path& dir, const std::vector<ManifestEntry>& entries,
                   const std::vector<std::string>& files, uint64_t end,
                   std::shared_ptr<const FileImage>* weights) {
  std::vector<fs::path> paths;
  std::vector<Sha256Hasher> hashers(files.size());
  uint64_t bytes = 0;
  for (const std::string& f : files) {
    paths.push_back(dir / f);
    std::error_code ec;
    const uintmax_t size = fs::file_size(paths.back(), ec);
    if (ec) return ErrnoStatus(ec.value(), "cannot stat", paths.back());
    bytes += std::min<uintmax_t>(size, UINT64_MAX - bytes);
  }
  if (bytes > end) {
    return DataLoss(dir.string() + ": " + WeightsName(files) + (files.size() == 1 ? " is " : " hold ") +
                    std::to_string(bytes) + " bytes, but " +
                    kGraph + "'s weight entries end at byte " + std::to_string(end));
  }
  const auto hash = [&hashers](size_t part, std::span<const std::byte> bytes) { hashers[part].Update(bytes); };
  LS_ASSIGN_OR_RETURN(*weights, FileImage::ReadParts(paths, end, hash));
  for (size_t k = 0; k < files.size(); ++k) {
    const std::string actual = hashers[k].FinishHex();
    for (const ManifestEntry& e : entries) {
      if (e.path == files[k] && e.sha256 != actual) return ChecksumMismatch(paths[k], e.sha256, actual);
    }
  }
  return Status::Ok();
}

// Checks the SHA-256 of every listed file but the weights (ReadWeights). model.pb is read into
// memory and hashed there as it arrives, so what is used is exactly what was checked, whatever
// happens to the file afterwards (file_image.h).
Status VerifyChecksums(const fs::path& dir, const std::vector<ManifestEntry>& entries,
                       const std::vector<std::string>& weight_files, std::string* graph) {
  const std::set<std::string_view> weight_set(weight_files.begin(), weight_files.end());
  for (const ManifestEntry& e : entries) {
    if (weight_set.count(e.path) > 0) continue;
    const fs::path path = dir / e.path;
    std::string actual;
    if (e.path == kGraph) {
      Sha256Hasher hasher;
      const auto hash = [&hasher](std::span<const std::byte> bytes) { hasher.Update(bytes); };
      // Bounded before a byte is read or hashed: a huge sparse file costs nothing to make.
      LS_ASSIGN_OR_RETURN(std::shared_ptr<const FileImage> file, FileImage::Read(path, kMaxModelProtoBytes, hash));
      actual = hasher.FinishHex();
      graph->assign(reinterpret_cast<const char*>(file->data()), file->size());
    } else {
      LS_ASSIGN_OR_RETURN(actual, Sha256File(path));
    }
    if (actual != e.sha256) return ChecksumMismatch(path, e.sha256, actual);
  }
  return Status::Ok();
}

StatusOr<proto::BundleDef> ParseBundleDef(const std::string& bytes) {
  proto::BundleDef def;
  // kMaxModelProtoBytes keeps the int cast exact. Parsing allocates in proportion to the input.
  if (!def.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return DataLoss(kGraph + ": cannot parse BundleDef (truncated or corrupted)");
  }
  if (def.format_version() != kBundleFormatVersion) {
    return InvalidArgument(kGraph + ": format_version " + std::to_string(def.format_version()) +
                           " is not supported; this reader supports version " +
                           std::to_string(kBundleFormatVersion));
  }
  return def;
}

}  // namespace

StatusOr<Model> ReadBundle(const fs::path& dir) {
  std::error_code ec;
  // status, not symlink_status: the version directory itself may be a link (a model store
  // that deduplicates versions); only what is inside must be plain files.
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) return NotFound("bundle directory " + dir.string() + " does not exist");
  if (!fs::is_directory(st)) return NotFound("bundle path " + dir.string() + " is not a directory");

  LS_ASSIGN_OR_RETURN(std::vector<ManifestEntry> manifest, ReadManifest(dir));
  auto weight_files = ListedWeightFiles(manifest);
  if (!weight_files.ok()) return weight_files.status().WithPrefix((dir / kBundleManifestFile).string());
  LS_RETURN_IF_ERROR(CheckListedFilesExist(dir, manifest));
  LS_RETURN_IF_ERROR(CheckNoUnlistedFiles(dir, manifest));
  std::string graph_bytes;
  LS_RETURN_IF_ERROR(VerifyChecksums(dir, manifest, *weight_files, &graph_bytes));
  LS_ASSIGN_OR_RETURN(proto::BundleDef def, ParseBundleDef(graph_bytes));
  std::shared_ptr<const FileImage> weights_file;
  LS_RETURN_IF_ERROR(ReadWeights(dir, manifest, *weight_files, WeightsEnd(def), &weights_file));

  Model model;
  auto graph = GraphFromProto(def);
  if (!graph.ok()) return graph.status().WithPrefix(kGraph);
  model.graph = std::move(*graph);
  LS_ASSIGN_OR_RETURN(model.weights, DecodeWeights(def, weights_file, WeightsName(*weight_files)));
  auto analysis = AnalyzeGraph(model);
  if (!analysis.ok()) {
    // AnalyzeGraph says NotFound for a missing weight or node; from a reader that would read
    // as "no bundle here", when the bundle is there and wrong.
    const Status& s = analysis.status();
    const StatusCode code = s.code() == StatusCode::kInternal ? s.code() : StatusCode::kInvalidArgument;
    return Status(code, s.message()).WithPrefix(kGraph);
  }

  spdlog::info("read bundle {} ({} nodes, {} weights, {} bytes of weights in {} files)", dir.string(),
               model.graph.nodes.size(), model.weights.size(), weights_file->size(), weight_files->size());
  return model;
}

}  // namespace lockstep
