#include "runtime/saved_model/checkpoint.h"

#include <cstring>

#include "runtime/bundle/file_image.h"
#include "runtime/crc32c.h"
#include "runtime/saved_model/sstable.h"
#include "runtime/saved_model/tensor_proto.h"

namespace lockstep {
namespace {

// Far above any index file (a few hundred bytes per variable), low enough to read whole.
constexpr uint64_t kMaxIndexBytes = uint64_t{256} << 20;

// "00007": TensorFlow's five-digit shard numbers.
std::string FiveDigits(int n) {
  std::string digits = std::to_string(n);
  return std::string(digits.size() < 5 ? 5 - digits.size() : 0, '0') + digits;
}

std::filesystem::path ShardPath(const std::filesystem::path& prefix, int shard, int num_shards) {
  std::filesystem::path path = prefix;
  path += ".data-" + FiveDigits(shard) + "-of-" + FiveDigits(num_shards);
  return path;
}

}  // namespace

StatusOr<Checkpoint> Checkpoint::Open(const std::filesystem::path& prefix) {
  std::filesystem::path index_path = prefix;
  index_path += ".index";
  LS_ASSIGN_OR_RETURN(std::shared_ptr<const FileImage> image, FileImage::Read(index_path, kMaxIndexBytes));
  const std::string_view contents(reinterpret_cast<const char*>(image->data()), image->size());
  LS_ASSIGN_OR_RETURN(std::vector<TableEntry> table, ReadTable(contents, index_path.string()));

  Checkpoint checkpoint;
  checkpoint.prefix_ = prefix;
  auto bad = [&](const std::string& key, const std::string& what) {
    return InvalidArgument(index_path.string() + ": entry '" + key + "': " + what);
  };
  bool have_header = false;
  for (const TableEntry& e : table) {
    if (e.key.empty()) {
      tensorflow::BundleHeaderProto header;
      if (!header.ParseFromString(e.value)) return bad(e.key, "header is not a BundleHeaderProto");
      if (header.endianness() != tensorflow::BundleHeaderProto::LITTLE) {
        return bad(e.key, "big-endian checkpoints are not supported");
      }
      if (header.num_shards() < 1 || header.num_shards() > 99999) {
        return bad(e.key, "num_shards " + std::to_string(header.num_shards()) + " is out of range");
      }
      checkpoint.num_shards_ = header.num_shards();
      have_header = true;
      continue;
    }
    tensorflow::BundleEntryProto entry;
    if (!entry.ParseFromString(e.value)) return bad(e.key, "value is not a BundleEntryProto");
    checkpoint.entries_.emplace(e.key, std::move(entry));
  }
  if (!have_header) return InvalidArgument(index_path.string() + ": no header entry");
  return checkpoint;
}

StatusOr<Tensor> Checkpoint::Read(std::string_view key) const {
  auto it = entries_.find(key);
  std::filesystem::path index_path = prefix_;
  index_path += ".index";
  if (it == entries_.end()) {
    return NotFound(index_path.string() + ": no variable '" + std::string(key) + "'");
  }
  const tensorflow::BundleEntryProto& entry = it->second;
  auto bad = [&](const std::string& what) {
    return InvalidArgument(index_path.string() + ": variable '" + std::string(key) + "': " + what);
  };
  if (entry.slices_size() > 0) return bad("saved in slices (a partitioned variable), which is not supported");
  if (entry.dtype() == tensorflow::DT_STRING) return bad("string variables are not supported");
  StatusOr<DType> dtype = DataTypeToDType(entry.dtype());
  if (!dtype.ok()) return bad(dtype.status().message());
  StatusOr<Shape> shape = ShapeFromProto(entry.shape());
  if (!shape.ok()) return bad(shape.status().message());
  Tensor tensor(*dtype, *shape);
  if (entry.size() < 0 || static_cast<uint64_t>(entry.size()) != tensor.byte_size()) {
    return bad("stored size " + std::to_string(entry.size()) + " does not match " + shape->ToString() +
               " of " + std::string(DTypeName(*dtype)));
  }
  if (entry.shard_id() < 0 || entry.shard_id() >= num_shards_) {
    return bad("shard " + std::to_string(entry.shard_id()) + " is out of range");
  }
  // Shards are read per variable: a SavedModel has few, and this keeps no file open or mapped.
  const std::filesystem::path shard = ShardPath(prefix_, entry.shard_id(), num_shards_);
  LS_ASSIGN_OR_RETURN(std::shared_ptr<const FileImage> image, FileImage::Read(shard));
  if (entry.offset() < 0 || static_cast<uint64_t>(entry.offset()) > image->size() ||
      image->size() - entry.offset() < static_cast<uint64_t>(entry.size())) {
    return DataLoss(shard.string() + ": variable '" + std::string(key) + "' lies past the end of the file (" +
                    std::to_string(image->size()) + " bytes; truncated?)");
  }
  const std::string_view bytes(reinterpret_cast<const char*>(image->data()) + entry.offset(), entry.size());
  if (UnmaskCrc32c(entry.crc32c()) != Crc32c(bytes)) {
    return DataLoss(shard.string() + ": variable '" + std::string(key) +
                    "' fails its CRC-32C check (corrupted)");
  }
  if (!bytes.empty()) std::memcpy(tensor.mutable_raw_data(), bytes.data(), bytes.size());
  return tensor;
}

}  // namespace lockstep
