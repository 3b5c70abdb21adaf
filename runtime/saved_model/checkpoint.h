// Reads the variables of a SavedModel: TensorFlow's tensor-bundle checkpoint, a table
// `<prefix>.index` (sstable.h) mapping each variable's name to a BundleEntryProto (dtype,
// shape, shard, offset, size, CRC-32C), and the shards `<prefix>.data-SSSSS-of-NNNNN` holding
// the raw little-endian bytes. Every entry's bytes are checked against its CRC before they are
// used, and every size against the files; a flipped byte or a truncated file is an error that
// names the file and the variable.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "runtime/status.h"
#include "runtime/tensor.h"
#include "tensorflow/core/protobuf/tensor_bundle.pb.h"

namespace lockstep {

class Checkpoint {
 public:
  // Reads and checks `<prefix>.index` (the prefix is ".../variables/variables").
  static StatusOr<Checkpoint> Open(const std::filesystem::path& prefix);

  bool Contains(std::string_view key) const { return entries_.count(key) != 0; }
  // The variable `key`, read from its shard and CRC-checked. Numeric and bool dtypes only.
  StatusOr<Tensor> Read(std::string_view key) const;

 private:
  std::filesystem::path prefix_;
  int num_shards_ = 1;
  std::map<std::string, tensorflow::BundleEntryProto, std::less<>> entries_;
};

}  // namespace lockstep
