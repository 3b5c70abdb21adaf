#include "runtime/example_wire.h"

#include <cstring>

namespace lockstep {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// A bounds-checked cursor over protobuf wire bytes. Every read fails (returns false) rather
// than run past the end.
class WireReader {
 public:
  explicit WireReader(std::string_view bytes)
      : p_(reinterpret_cast<const uint8_t*>(bytes.data())), end_(p_ + bytes.size()) {}

  bool done() const { return p_ == end_; }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

  bool ReadVarint(uint64_t* value) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      const uint8_t byte = *p_++;
      v |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80u) == 0) {
        *value = v;
        return true;
      }
    }
    return false;  // more than ten bytes
  }

  bool ReadTag(uint32_t* field, uint32_t* wire_type) {
    uint64_t tag = 0;
    if (!ReadVarint(&tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) return false;
    *field = static_cast<uint32_t>(tag >> 3);
    *wire_type = static_cast<uint32_t>(tag & 7);
    return true;
  }

  bool ReadBytes(size_t n, std::string_view* out) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    *out = std::string_view(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return true;
  }

  bool ReadLengthDelimited(std::string_view* out) {
    uint64_t n = 0;
    return ReadVarint(&n) && n <= static_cast<uint64_t>(end_ - p_) && ReadBytes(static_cast<size_t>(n), out);
  }

  // Skips a field of `wire_type` whose tag was just read. Groups (3, 4) are refused: proto3
  // messages never hold them.
  bool Skip(uint32_t wire_type) {
    std::string_view ignored;
    uint64_t v = 0;
    switch (wire_type) {
      case kVarint: return ReadVarint(&v);
      case kFixed64: return ReadBytes(8, &ignored);
      case kLengthDelimited: return ReadLengthDelimited(&ignored);
      case kFixed32: return ReadBytes(4, &ignored);
      default: return false;
    }
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

Status Malformed(std::string_view what) {
  return InvalidArgument("malformed tf.Example: " + std::string(what));
}

// Calls fn(bytes) for every occurrence of length-delimited field `wanted` of `message`,
// skipping the other fields. An occurrence of `wanted` with another wire type goes to
// `other(wire_type, reader)`, which must consume it (packed lists accept both forms).
template <typename Fn, typename Other>
Status ForEachField(std::string_view message, uint32_t wanted, std::string_view what, Fn&& fn, Other&& other) {
  WireReader r(message);
  while (!r.done()) {
    uint32_t field = 0, wire_type = 0;
    if (!r.ReadTag(&field, &wire_type)) return Malformed(std::string(what) + ": bad tag");
    if (field == wanted && wire_type == kLengthDelimited) {
      std::string_view bytes;
      if (!r.ReadLengthDelimited(&bytes)) return Malformed(std::string(what) + ": truncated field");
      LS_RETURN_IF_ERROR(fn(bytes));
    } else if (field == wanted) {
      LS_RETURN_IF_ERROR(other(wire_type, r));
    } else if (!r.Skip(wire_type)) {
      return Malformed(std::string(what) + ": truncated or unknown field");
    }
  }
  return Status::Ok();
}

template <typename Fn>
Status ForEachField(std::string_view message, uint32_t wanted, std::string_view what, Fn&& fn) {
  return ForEachField(message, wanted, what, std::forward<Fn>(fn), [&](uint32_t, WireReader&) {
    return Malformed(std::string(what) + ": field " + std::to_string(wanted) + " has the wrong wire type");
  });
}

// Visits the values of a FloatList (wire type 5, packed or one by one) or an Int64List (wire
// type 0), calling emit(value) in order.
template <typename Emit>
Status ForEachNumber(const ExampleFeature& feature, Emit&& emit) {
  const bool is_float = feature.kind == ExampleFeature::Kind::kFloat;
  const char* what = is_float ? "float_list" : "int64_list";
  auto read_one = [&](WireReader& r) {
    if (is_float) {
      std::string_view b;
      if (!r.ReadBytes(4, &b)) return false;
      float f;
      std::memcpy(&f, b.data(), 4);  // little-endian on every host we build for
      emit(f);
      return true;
    }
    uint64_t v = 0;
    if (!r.ReadVarint(&v)) return false;
    emit(static_cast<int64_t>(v));
    return true;
  };
  const uint32_t single = is_float ? kFixed32 : kVarint;
  return ForEachField(
      feature.list, 1, what,
      [&](std::string_view packed) {
        if (is_float) {
          if (packed.size() % 4 != 0) return Malformed("packed float_list of odd length");
          for (size_t k = 0; k < packed.size(); k += 4) {
            float f;
            std::memcpy(&f, packed.data() + k, 4);  // little-endian on every host we build for
            emit(f);
          }
          return Status::Ok();
        }
        // Varints of one or two bytes (ids, pixel values) decoded in line; longer ones by the
        // general reader. An image's hundreds of values make this the loop that matters.
        const auto* p = reinterpret_cast<const uint8_t*>(packed.data());
        const auto* end = p + packed.size();
        while (p < end) {
          if (p[0] < 0x80) {
            emit(int64_t{p[0]});
            p += 1;
          } else if (end - p >= 2 && p[1] < 0x80) {
            emit(int64_t{(p[0] & 0x7f) | (int64_t{p[1]} << 7)});
            p += 2;
          } else {
            WireReader r(std::string_view(reinterpret_cast<const char*>(p), static_cast<size_t>(end - p)));
            if (!read_one(r)) return Malformed(std::string(what) + ": truncated packed value");
            p = end - r.remaining();
          }
        }
        return Status::Ok();
      },
      [&](uint32_t wire_type, WireReader& r) {
        if (wire_type != single || !read_one(r)) return Malformed(std::string(what) + ": bad value");
        return Status::Ok();
      });
}

Status CheckKind(const ExampleFeature& feature, ExampleFeature::Kind kind) {
  if (feature.kind != kind) {
    return InvalidArgument("feature holds a " + std::string(ExampleFeatureKindName(feature.kind)) + ", not a " +
                           std::string(ExampleFeatureKindName(kind)));
  }
  return Status::Ok();
}

template <typename T>
Status ReadNumbers(const ExampleFeature& feature, ExampleFeature::Kind kind, std::span<T> out) {
  LS_RETURN_IF_ERROR(CheckKind(feature, kind));
  size_t i = 0;
  LS_RETURN_IF_ERROR(ForEachNumber(feature, [&](auto v) {
    if (i < out.size()) out[i] = static_cast<T>(v);
    ++i;
  }));
  if (i != out.size()) return InvalidArgument("feature has " + std::to_string(i) + " values, expected " +
                                              std::to_string(out.size()));
  return Status::Ok();
}

}  // namespace

std::string_view ExampleFeatureKindName(ExampleFeature::Kind kind) {
  switch (kind) {
    case ExampleFeature::Kind::kAbsent: return "absent";
    case ExampleFeature::Kind::kBytes: return "bytes_list";
    case ExampleFeature::Kind::kFloat: return "float_list";
    case ExampleFeature::Kind::kInt64: return "int64_list";
  }
  return "?";
}

StatusOr<ExampleFeature> FindExampleFeature(std::string_view example, std::string_view key) {
  ExampleFeature found;
  // Example.features (1) -> Features.feature (1, map entries) -> entry {key = 1, value = 2}.
  LS_RETURN_IF_ERROR(ForEachField(example, 1, "Example", [&](std::string_view features) {
    return ForEachField(features, 1, "Features", [&](std::string_view entry) {
      std::string_view entry_key;
      std::string_view value;
      bool has_value = false;
      WireReader r(entry);
      while (!r.done()) {
        uint32_t field = 0, wire_type = 0;
        if (!r.ReadTag(&field, &wire_type)) return Malformed("feature map entry: bad tag");
        if ((field == 1 || field == 2) && wire_type == kLengthDelimited) {
          std::string_view bytes;
          if (!r.ReadLengthDelimited(&bytes)) return Malformed("feature map entry: truncated field");
          if (field == 1) {
            entry_key = bytes;
          } else {
            value = bytes;
            has_value = true;
          }
        } else if (field == 1 || field == 2 || !r.Skip(wire_type)) {
          return Malformed("feature map entry: bad field");
        }
      }
      if (entry_key != key) return Status::Ok();
      ExampleFeature feature;
      if (has_value) {
        WireReader v(value);
        while (!v.done()) {
          uint32_t field = 0, wire_type = 0;
          if (!v.ReadTag(&field, &wire_type)) return Malformed("Feature: bad tag");
          if (field >= 1 && field <= 3 && wire_type == kLengthDelimited) {
            if (!v.ReadLengthDelimited(&feature.list)) return Malformed("Feature: truncated list");
            feature.kind = field == 1 ? ExampleFeature::Kind::kBytes
                           : field == 2 ? ExampleFeature::Kind::kFloat
                                        : ExampleFeature::Kind::kInt64;
          } else if ((field >= 1 && field <= 3) || !v.Skip(wire_type)) {
            return Malformed("Feature: bad field");
          }
        }
      }
      if (feature.kind != ExampleFeature::Kind::kAbsent) found = feature;  // no list: passed over
      return Status::Ok();
    });
  }));
  return found;
}

Status ReadExampleFloats(const ExampleFeature& feature, std::span<float> out) {
  return ReadNumbers(feature, ExampleFeature::Kind::kFloat, out);
}

Status ReadExampleInt64s(const ExampleFeature& feature, std::span<int64_t> out) {
  return ReadNumbers(feature, ExampleFeature::Kind::kInt64, out);
}

Status ReadExampleBytes(const ExampleFeature& feature, std::span<std::string> out) {
  LS_RETURN_IF_ERROR(CheckKind(feature, ExampleFeature::Kind::kBytes));
  size_t i = 0;
  LS_RETURN_IF_ERROR(ForEachField(feature.list, 1, "bytes_list", [&](std::string_view bytes) {
    if (i < out.size()) out[i].assign(bytes);
    ++i;
    return Status::Ok();
  }));
  if (i != out.size()) return InvalidArgument("feature has " + std::to_string(i) + " values, expected " +
                                              std::to_string(out.size()));
  return Status::Ok();
}

StatusOr<int64_t> ReadExampleNumbersAsFloats(const ExampleFeature& feature, std::span<float> out) {
  if (feature.kind != ExampleFeature::Kind::kFloat && feature.kind != ExampleFeature::Kind::kInt64) {
    return InvalidArgument("feature holds a " + std::string(ExampleFeatureKindName(feature.kind)) +
                           ", not a float_list or int64_list");
  }
  int64_t i = 0;
  LS_RETURN_IF_ERROR(ForEachNumber(feature, [&](auto v) {
    if (static_cast<size_t>(i) < out.size()) out[static_cast<size_t>(i)] = static_cast<float>(v);
    ++i;
  }));
  return i;
}

StatusOr<int64_t> ReadExampleBytesViews(const ExampleFeature& feature, std::span<std::string_view> out) {
  LS_RETURN_IF_ERROR(CheckKind(feature, ExampleFeature::Kind::kBytes));
  int64_t i = 0;
  LS_RETURN_IF_ERROR(ForEachField(feature.list, 1, "bytes_list", [&](std::string_view bytes) {
    if (static_cast<size_t>(i) < out.size()) out[static_cast<size_t>(i)] = bytes;
    ++i;
    return Status::Ok();
  }));
  return i;
}

}  // namespace lockstep
