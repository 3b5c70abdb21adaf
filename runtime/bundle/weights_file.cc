#include "runtime/bundle/weights_file.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "runtime/bundle/bundle.h"
#include "runtime/graph_proto.h"

namespace lockstep {

// Raw storage is the in-memory representation; a big-endian host would need byte swapping.
static_assert(std::endian::native == std::endian::little, "weights.bin is little-endian");

namespace {

constexpr uint64_t PaddingTo(uint64_t offset, uint64_t alignment) {
  return (alignment - offset % alignment) % alignment;
}

// The bytes the weights take in the stream, laid out as WriteWeights lays them out: the
// writer must know how many shards it writes before it names the first.
uint64_t StreamSize(const WeightMap& weights) {
  uint64_t offset = 0;
  for (const auto& [name, tensor] : weights) {
    offset += PaddingTo(offset, kWeightAlignment);
    if (tensor.dtype() == DType::kString) {
      for (const std::string& s : tensor.data<std::string>()) offset += 8 + s.size();
    } else {
      offset += tensor.byte_size();
    }
  }
  return offset;
}

// Writes the stream into its files, starting the next shard where one is full. Small pieces
// (string lengths, padding) are collected into one write; large tensors go straight from
// their own memory to the file.
class WeightSink {
 public:
  WeightSink(std::filesystem::path dir, uint64_t total, uint64_t shard_bytes, int count)
      : dir_(std::move(dir)), total_(total), shard_bytes_(shard_bytes), count_(count) {}

  uint64_t offset() const { return offset_; }

  Status Append(std::span<const std::byte> data) {
    while (!data.empty()) {
      if (!file_) LS_RETURN_IF_ERROR(StartShard());
      const uint64_t room = shard_end_ - offset_;
      if (room == 0) return Internal("the weights came to more than the " + std::to_string(total_) + " bytes laid out");
      const std::span<const std::byte> piece = data.first(static_cast<size_t>(std::min<uint64_t>(room, data.size())));
      hasher_.Update(piece);
      if (piece.size() >= kDirectWrite) {
        LS_RETURN_IF_ERROR(Flush());
        LS_RETURN_IF_ERROR(file_->Append(piece));
      } else {
        buffer_.insert(buffer_.end(), piece.begin(), piece.end());
        if (buffer_.size() >= kDirectWrite) LS_RETURN_IF_ERROR(Flush());
      }
      offset_ += piece.size();
      data = data.subspan(piece.size());
      if (offset_ == shard_end_) LS_RETURN_IF_ERROR(FinishShard());
    }
    return Status::Ok();
  }
  Status Append(std::string_view s) { return Append(std::as_bytes(std::span(s.data(), s.size()))); }

  Status PadTo(uint64_t alignment) {
    static constexpr std::array<std::byte, kWeightAlignment> kZeros{};
    return Append(std::span(kZeros.data(), static_cast<size_t>(PaddingTo(offset_, alignment))));
  }

  // The files written, with their SHA-256. An empty stream is one empty weights.bin.
  StatusOr<std::vector<ManifestEntry>> Finish() {
    if (offset_ != total_) {
      return Internal("the weights came to " + std::to_string(offset_) + " bytes, not the " + std::to_string(total_) +
                      " laid out");
    }
    if (total_ == 0) {
      LS_RETURN_IF_ERROR(StartShard());
      LS_RETURN_IF_ERROR(FinishShard());
    }
    return std::move(written_);
  }

 private:
  static constexpr size_t kDirectWrite = size_t{1} << 20;

  Status StartShard() {
    const int index = static_cast<int>(written_.size());
    LS_ASSIGN_OR_RETURN(WritableFile file, WritableFile::Create(dir_ / WeightFileName(index, count_)));
    file_.emplace(std::move(file));
    hasher_ = Sha256Hasher();
    shard_end_ = std::min(total_, offset_ + shard_bytes_);
    return Status::Ok();
  }

  Status FinishShard() {
    LS_RETURN_IF_ERROR(Flush());
    LS_RETURN_IF_ERROR(file_->Sync());
    LS_RETURN_IF_ERROR(file_->Close());
    written_.push_back({hasher_.FinishHex(), file_->path().filename().string()});
    file_.reset();
    return Status::Ok();
  }

  Status Flush() {
    if (buffer_.empty()) return Status::Ok();
    Status s = file_->Append(buffer_);
    buffer_.clear();
    return s;
  }

  const std::filesystem::path dir_;
  const uint64_t total_;
  const uint64_t shard_bytes_;
  const int count_;
  std::optional<WritableFile> file_;
  Sha256Hasher hasher_;
  uint64_t shard_end_ = 0;
  std::vector<std::byte> buffer_;
  uint64_t offset_ = 0;
  std::vector<ManifestEntry> written_;
};

std::string EntryLabel(int index, const std::string& name) {
  return "model.pb: weight entry #" + std::to_string(index) + " ('" + name + "')";
}

StatusOr<Tensor> DecodeStrings(const std::string& label, std::string_view weights_name, const Shape& shape,
                               int64_t count, std::span<const std::byte> bytes) {
  const std::string in = " in " + std::string(weights_name);
  // Every element takes at least its 8-byte length, so the count is bounded by the bytes the
  // entry owns: a hostile shape cannot make us allocate more strings than the file allows.
  if (static_cast<uint64_t>(count) > bytes.size() / 8) {
    return DataLoss(label + ": " + std::to_string(count) + " strings cannot fit in " + std::to_string(bytes.size()) +
                    " bytes of" + in.substr(3));
  }
  Tensor t(DType::kString, shape);
  std::span<std::string> out = t.mutable_data<std::string>();
  size_t pos = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (bytes.size() - pos < 8) {
      return DataLoss(label + ": string element " + std::to_string(i) + " runs past the entry's end" + in);
    }
    uint64_t len = 0;
    std::memcpy(&len, bytes.data() + pos, 8);
    pos += 8;
    if (len > bytes.size() - pos) {
      return DataLoss(label + ": string element " + std::to_string(i) + " claims " + std::to_string(len) +
                      " bytes but only " + std::to_string(bytes.size() - pos) + " remain in the entry" + in);
    }
    out[static_cast<size_t>(i)].assign(reinterpret_cast<const char*>(bytes.data() + pos), static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
  }
  if (pos != bytes.size()) {
    return DataLoss(label + ": " + std::to_string(bytes.size() - pos) + " bytes" + in +
                    " follow the last string element");
  }
  return t;
}

}  // namespace

std::string WeightFileName(int index, int count) {
  if (count == 1) return std::string(kBundleWeightsFile);
  char name[64];
  std::snprintf(name, sizeof name, "weights-%05d-of-%05d.bin", index, count);
  return name;
}

StatusOr<std::vector<std::string>> ListedWeightFiles(const std::vector<ManifestEntry>& manifest) {
  bool single = false;
  int count = 0;
  std::vector<bool> seen;
  for (const ManifestEntry& e : manifest) {
    if (e.path == kBundleWeightsFile) {
      single = true;
      continue;
    }
    int index = 0;
    int of = 0;
    int end = 0;
    // %n counts only if everything before it matched; the name must also be exactly the form
    // WeightFileName makes ("weights-1-of-2.bin" is some other file).
    if (std::sscanf(e.path.c_str(), "weights-%5d-of-%5d.bin%n", &index, &of, &end) != 2 ||
        static_cast<size_t>(end) != e.path.size() || of < 2 || index < 0 || index >= of || e.path != WeightFileName(index, of)) {
      continue;
    }
    if (count != 0 && of != count) {
      return DataLoss("lists shards of " + std::to_string(count) + " and of " + std::to_string(of) +
                      " weight files");
    }
    count = of;
    seen.resize(static_cast<size_t>(count));
    seen[static_cast<size_t>(index)] = true;
  }
  if (single && count != 0) return DataLoss("lists both " + std::string(kBundleWeightsFile) + " and shards");
  if (single) return std::vector<std::string>{std::string(kBundleWeightsFile)};
  if (count == 0) return DataLoss("does not list " + std::string(kBundleWeightsFile) + " or its shards");
  std::vector<std::string> files;
  for (int i = 0; i < count; ++i) {
    if (!seen[static_cast<size_t>(i)]) return DataLoss("does not list " + WeightFileName(i, count));
    files.push_back(WeightFileName(i, count));
  }
  return files;
}

StatusOr<std::vector<ManifestEntry>> WriteWeights(const WeightMap& weights, const std::filesystem::path& dir,
                                                  uint64_t shard_bytes, proto::BundleDef* out) {
  if (shard_bytes == 0) return InvalidArgument("the weight shard size must be positive");
  const uint64_t total = StreamSize(weights);
  const uint64_t shards = total <= shard_bytes ? 1 : (total - 1) / shard_bytes + 1;
  if (shards > kMaxWeightShards) {
    return InvalidArgument(std::to_string(total) + " bytes of weights would take " + std::to_string(shards) +
                           " shards of " + std::to_string(shard_bytes) + " bytes; the most is " +
                           std::to_string(kMaxWeightShards));
  }
  WeightSink sink(dir, total, shard_bytes, static_cast<int>(shards));
  for (const auto& [name, tensor] : weights) {
    if (!IsValidDType(static_cast<int>(tensor.dtype()))) {
      return InvalidArgument("weight '" + name + "' has an invalid dtype");
    }
    LS_RETURN_IF_ERROR(sink.PadTo(kWeightAlignment));
    proto::WeightEntry* entry = out->add_weights();
    entry->set_name(name);
    entry->set_dtype(DTypeToProto(tensor.dtype()));
    ShapeToProto(tensor.shape(), entry->mutable_shape());
    const uint64_t start = sink.offset();
    entry->set_offset(start);
    if (tensor.dtype() == DType::kString) {
      for (const std::string& s : tensor.data<std::string>()) {
        const uint64_t len = s.size();
        std::array<std::byte, 8> le{};
        std::memcpy(le.data(), &len, 8);
        LS_RETURN_IF_ERROR(sink.Append(le));
        LS_RETURN_IF_ERROR(sink.Append(s));
      }
    } else if (tensor.byte_size() > 0) {
      LS_RETURN_IF_ERROR(sink.Append(std::span(static_cast<const std::byte*>(tensor.raw_data()), tensor.byte_size())));
    }
    entry->set_size(sink.offset() - start);
  }
  return sink.Finish();
}

StatusOr<WeightMap> DecodeWeights(const proto::BundleDef& def, const std::shared_ptr<const FileImage>& weights,
                                  std::string_view weights_name) {
  const uint64_t file_size = weights->size();
  WeightMap out;
  for (int i = 0; i < def.weights_size(); ++i) {
    const proto::WeightEntry& e = def.weights(i);
    const std::string label = EntryLabel(i, e.name());
    if (e.name().empty()) return InvalidArgument(label + " has an empty name");
    if (out.count(e.name()) > 0) return InvalidArgument(label + ": a weight named '" + e.name() + "' appears twice");
    auto dtype = DTypeFromProto(e.dtype());
    if (!dtype.ok()) return dtype.status().WithPrefix(label);
    auto shape = ShapeFromProto(e.shape());
    if (!shape.ok()) return shape.status().WithPrefix(label + " shape");
    if (!shape->IsFullyDefined()) return InvalidArgument(label + " has shape " + shape->ToString() + " with an unknown dimension");
    auto count = shape->CheckedNumElements();
    if (!count.ok()) return count.status().WithPrefix(label);
    if (e.offset() % kWeightAlignment != 0) {
      return InvalidArgument(label + " has offset " + std::to_string(e.offset()) + ", not a multiple of " +
                             std::to_string(kWeightAlignment));
    }
    if (*dtype != DType::kString) {
      // count <= 2^40 and element size <= 8: the product cannot overflow.
      const uint64_t expected = static_cast<uint64_t>(*count) * DTypeSize(*dtype);
      if (e.size() != expected) {
        return InvalidArgument(label + " has size " + std::to_string(e.size()) + " but " +
                               std::string(DTypeName(*dtype)) + shape->ToString() + " takes " +
                               std::to_string(expected) + " bytes");
      }
    }
    // Written so that neither side can overflow: offset + size may exceed 2^64.
    if (e.offset() > file_size || e.size() > file_size - e.offset()) {
      return DataLoss(label + " spans bytes [" + std::to_string(e.offset()) + ", +" + std::to_string(e.size()) +
                      ") but " + std::string(weights_name) + " is only " + std::to_string(file_size) + " bytes");
    }
    const std::byte* base = weights->data() == nullptr ? nullptr : weights->data() + e.offset();
    std::span<const std::byte> bytes(base, static_cast<size_t>(e.size()));
    Tensor t;
    if (*dtype == DType::kString) {
      LS_ASSIGN_OR_RETURN(t, DecodeStrings(label, weights_name, *shape, *count, bytes));
    } else {
      if (*dtype == DType::kBool) {
        // Any byte but 0 or 1 read as a bool is undefined behaviour, not merely a wrong value.
        for (size_t k = 0; k < bytes.size(); ++k) {
          if (bytes[k] != std::byte{0} && bytes[k] != std::byte{1}) {
            return DataLoss(label + ": bool element " + std::to_string(k) + " in " + std::string(weights_name) + " is neither 0 nor 1");
          }
        }
      }
      t = Tensor::View(*dtype, *shape, base, weights);
    }
    out.emplace(e.name(), std::move(t));
  }
  return out;
}

}  // namespace lockstep
