#include "runtime/bundle/weights_file.h"

#include <array>
#include <bit>
#include <cstring>
#include <string>

#include "runtime/graph_proto.h"

namespace lockstep {

// Raw storage is the in-memory representation; a big-endian host would need byte swapping.
static_assert(std::endian::native == std::endian::little, "weights.bin is little-endian");

namespace {

// Collects small pieces (string lengths, padding) into one write; large tensors go straight
// from their own memory to the file.
class WeightSink {
 public:
  WeightSink(WritableFile& file, Sha256Hasher& hasher) : file_(file), hasher_(hasher) {}

  uint64_t offset() const { return offset_; }

  Status Append(std::span<const std::byte> data) {
    offset_ += data.size();
    hasher_.Update(data);
    if (data.size() >= kDirectWrite) {
      LS_RETURN_IF_ERROR(Flush());
      return file_.Append(data);
    }
    buffer_.insert(buffer_.end(), data.begin(), data.end());
    return buffer_.size() >= kDirectWrite ? Flush() : Status::Ok();
  }
  Status Append(std::string_view s) { return Append(std::as_bytes(std::span(s.data(), s.size()))); }

  Status PadTo(uint64_t alignment) {
    static constexpr std::array<std::byte, kWeightAlignment> kZeros{};
    const uint64_t pad = (alignment - offset_ % alignment) % alignment;
    return Append(std::span(kZeros.data(), static_cast<size_t>(pad)));
  }

  Status Flush() {
    if (buffer_.empty()) return Status::Ok();
    Status s = file_.Append(buffer_);
    buffer_.clear();
    return s;
  }

 private:
  static constexpr size_t kDirectWrite = size_t{1} << 20;
  WritableFile& file_;
  Sha256Hasher& hasher_;
  std::vector<std::byte> buffer_;
  uint64_t offset_ = 0;
};

std::string EntryLabel(int index, const std::string& name) {
  return "model.pb: weight entry #" + std::to_string(index) + " ('" + name + "')";
}

StatusOr<Tensor> DecodeStrings(const std::string& label, const Shape& shape, int64_t count,
                               std::span<const std::byte> bytes) {
  // Every element takes at least its 8-byte length, so the count is bounded by the bytes the
  // entry owns: a hostile shape cannot make us allocate more strings than the file allows.
  if (static_cast<uint64_t>(count) > bytes.size() / 8) {
    return DataLoss(label + ": " + std::to_string(count) + " strings cannot fit in " + std::to_string(bytes.size()) +
                    " bytes of weights.bin");
  }
  Tensor t(DType::kString, shape);
  std::span<std::string> out = t.mutable_data<std::string>();
  size_t pos = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (bytes.size() - pos < 8) {
      return DataLoss(label + ": string element " + std::to_string(i) + " runs past the entry's end in weights.bin");
    }
    uint64_t len = 0;
    std::memcpy(&len, bytes.data() + pos, 8);
    pos += 8;
    if (len > bytes.size() - pos) {
      return DataLoss(label + ": string element " + std::to_string(i) + " claims " + std::to_string(len) +
                      " bytes but only " + std::to_string(bytes.size() - pos) + " remain in the entry in weights.bin");
    }
    out[static_cast<size_t>(i)].assign(reinterpret_cast<const char*>(bytes.data() + pos), static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
  }
  if (pos != bytes.size()) {
    return DataLoss(label + ": " + std::to_string(bytes.size() - pos) +
                    " bytes in weights.bin follow the last string element");
  }
  return t;
}

}  // namespace

Status WriteWeights(const WeightMap& weights, WritableFile& file, Sha256Hasher& hasher, proto::BundleDef* out) {
  WeightSink sink(file, hasher);
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
  return sink.Flush();
}

StatusOr<WeightMap> DecodeWeights(const proto::BundleDef& def, const std::shared_ptr<const FileImage>& weights) {
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
                      ") but weights.bin is only " + std::to_string(file_size) + " bytes");
    }
    const std::byte* base = weights->data() == nullptr ? nullptr : weights->data() + e.offset();
    std::span<const std::byte> bytes(base, static_cast<size_t>(e.size()));
    Tensor t;
    if (*dtype == DType::kString) {
      LS_ASSIGN_OR_RETURN(t, DecodeStrings(label, *shape, *count, bytes));
    } else {
      if (*dtype == DType::kBool) {
        // Any byte but 0 or 1 read as a bool is undefined behaviour, not merely a wrong value.
        for (size_t k = 0; k < bytes.size(); ++k) {
          if (bytes[k] != std::byte{0} && bytes[k] != std::byte{1}) {
            return DataLoss(label + ": bool element " + std::to_string(k) + " in weights.bin is neither 0 nor 1");
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
