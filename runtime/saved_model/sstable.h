// Reads a sorted-string table in LevelDB's format, which TensorFlow uses for a checkpoint's
// `variables.index`: data blocks of prefix-compressed keys with restart points, an index block
// of block handles, and a 48-byte footer ending in a magic number; every block is followed by
// its compression type (none or Snappy) and a masked CRC-32C of both.
//
// The whole table is read at once: an index holds a few entries per variable, and a reader
// that checks every block's CRC up front is simpler than a lazy one. Every varint, length,
// handle and key is checked against the file's bytes, so a truncated or hostile table is an
// InvalidArgument naming the file, never a crash.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/status.h"

namespace lockstep {

struct TableEntry {
  std::string key;
  std::string value;
};

inline constexpr uint64_t kTableMagic = 0xdb4775248b80fb57ull;

// All entries of the table in `contents`, in key order (checked strictly increasing).
// `file` names the table in errors.
StatusOr<std::vector<TableEntry>> ReadTable(std::string_view contents, std::string_view file);

}  // namespace lockstep
