// Reading one feature out of a serialized tf.Example without parsing it into messages: the
// ParseExample kernel's reader, which allocates nothing and reads each example's bytes where
// they lie.
//
// The wire format (tensorflow/core/example/example.proto, feature.proto):
//   Example  { Features features = 1; }
//   Features { map<string, Feature> feature = 1; }         entries: { key = 1; value = 2 }
//   Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
//   *List    { repeated bytes/float/int64 value = 1; }      packed or not, as protobuf accepts
//
// Protobuf's merging rules decide what a repeated or concatenated message means, and TF Serving
// relies on them: it feeds an example with its context as the two serializations concatenated,
// so that the example's features override the context's. Here, likewise, the last map entry
// for a key wins, and within an entry the last key and the last value; as in TensorFlow's
// parser, an entry whose Feature sets no list is passed over, as if it were not there.
// (Protobuf would merge two values of one entry of the same kind list by list; no serializer
// writes such an entry.) Unknown fields are skipped; groups, truncated fields and lengths past
// the end are errors.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "runtime/status.h"

namespace lockstep {

// A feature's list as it lies in the example: its kind and the list message's bytes.
struct ExampleFeature {
  enum class Kind { kAbsent, kBytes, kFloat, kInt64 };
  Kind kind = Kind::kAbsent;
  std::string_view list;
};

// "bytes_list", "float_list", "int64_list" or "absent".
std::string_view ExampleFeatureKindName(ExampleFeature::Kind kind);

// Finds feature `key` in the serialized Example `example`. kAbsent when no entry names it;
// InvalidArgument when the bytes are not a well-formed Example.
StatusOr<ExampleFeature> FindExampleFeature(std::string_view example, std::string_view key);

// Decode a list of the matching kind into `out`. InvalidArgument when the list is of another
// kind, is malformed, or holds other than out.size() values.
Status ReadExampleFloats(const ExampleFeature& feature, std::span<float> out);
Status ReadExampleInt64s(const ExampleFeature& feature, std::span<int64_t> out);
Status ReadExampleBytes(const ExampleFeature& feature, std::span<std::string> out);

// For readers that learn a feature's width from the data (model-train's input): a float_list
// or an int64_list (as floats) into `out`, returning how many values the list holds; only the
// first out.size() are written. InvalidArgument for a bytes_list or an absent feature.
StatusOr<int64_t> ReadExampleNumbersAsFloats(const ExampleFeature& feature, std::span<float> out);
// A bytes_list's values as views into the example; returns how many it holds, writing the first
// out.size().
StatusOr<int64_t> ReadExampleBytesViews(const ExampleFeature& feature, std::span<std::string_view> out);

}  // namespace lockstep
