#include "runtime/saved_model/sstable.h"

#include <cstdint>

#include "runtime/crc32c.h"
#include "runtime/saved_model/snappy.h"

namespace lockstep {
namespace {

constexpr size_t kFooterSize = 48;
constexpr size_t kBlockTrailerSize = 5;  // compression type + masked CRC-32C
// No real index block comes near this; it bounds what a hostile Snappy header can ask for.
constexpr size_t kMaxBlockSize = size_t{64} << 20;

struct BlockHandle {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// A cursor over bytes that fails, rather than reading past the end.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool Varint(uint64_t* value) {
    uint64_t v = 0;
    for (int shift = 0; shift <= 63; shift += 7) {
      if (pos_ == data_.size()) return false;
      const uint8_t byte = static_cast<uint8_t>(data_[pos_++]);
      v |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) {
        *value = v;
        return true;
      }
    }
    return false;
  }
  bool Bytes(uint64_t n, std::string_view* out) {
    if (data_.size() - pos_ < n) return false;
    *out = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool Handle(BlockHandle* handle) { return Varint(&handle->offset) && Varint(&handle->size); }
  size_t pos() const { return pos_; }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

uint32_t DecodeFixed32(std::string_view bytes) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  return v;
}

class TableReader {
 public:
  TableReader(std::string_view contents, std::string_view file) : contents_(contents), file_(file) {}

  Status Error(const std::string& what) const {
    return InvalidArgument(std::string(file_) + ": not a valid table: " + what);
  }

  // The contents of the block at `handle`, CRC checked and uncompressed.
  StatusOr<std::string> ReadBlock(const BlockHandle& handle, std::string_view what) const {
    if (handle.offset > contents_.size() || handle.size > contents_.size() - handle.offset ||
        contents_.size() - handle.offset - handle.size < kBlockTrailerSize) {
      return Error(std::string(what) + " block lies outside the file (truncated?)");
    }
    const std::string_view block = contents_.substr(handle.offset, handle.size + 1);
    const uint32_t stored = DecodeFixed32(contents_.substr(handle.offset + handle.size + 1, 4));
    if (UnmaskCrc32c(stored) != Crc32c(block)) {
      return DataLoss(std::string(file_) + ": " + std::string(what) + " block at offset " +
                      std::to_string(handle.offset) + " fails its CRC-32C check (corrupted)");
    }
    const std::string_view data = block.substr(0, handle.size);
    switch (static_cast<uint8_t>(block.back())) {
      case 0:
        return std::string(data);
      case 1: {
        StatusOr<std::string> out = SnappyUncompress(data, kMaxBlockSize);
        if (!out.ok()) return Error(std::string(what) + " block: " + out.status().message());
        return out;
      }
      default:
        return Error(std::string(what) + " block has unknown compression type " +
                     std::to_string(static_cast<uint8_t>(block.back())));
    }
  }

  // Appends the entries of `block` to `out`.
  Status ParseBlock(std::string_view block, std::string_view what, std::vector<TableEntry>* out) const {
    if (block.size() < 4) return Error(std::string(what) + " block is too short");
    const uint32_t num_restarts = DecodeFixed32(block.substr(block.size() - 4));
    if (num_restarts == 0 || num_restarts > (block.size() - 4) / 4) {
      return Error(std::string(what) + " block has a bad restart count");
    }
    const size_t entries_end = block.size() - 4 - size_t{num_restarts} * 4;
    Reader r(block.substr(0, entries_end));
    std::string key;
    while (r.pos() < entries_end) {
      uint64_t shared = 0, non_shared = 0, value_size = 0;
      std::string_view delta, value;
      if (!r.Varint(&shared) || !r.Varint(&non_shared) || !r.Varint(&value_size) || shared > key.size() ||
          !r.Bytes(non_shared, &delta) || !r.Bytes(value_size, &value)) {
        return Error(std::string(what) + " block has a malformed entry");
      }
      key.resize(shared);
      key.append(delta);
      out->push_back({key, std::string(value)});
    }
    return Status::Ok();
  }

  StatusOr<std::vector<TableEntry>> Read() const {
    if (contents_.size() < kFooterSize) return Error("shorter than its footer (truncated?)");
    const std::string_view footer = contents_.substr(contents_.size() - kFooterSize);
    const uint64_t magic =
        uint64_t{DecodeFixed32(footer.substr(40))} | (uint64_t{DecodeFixed32(footer.substr(44))} << 32);
    if (magic != kTableMagic) return Error("bad magic number (truncated or not a table)");
    Reader fr(footer.substr(0, 40));
    BlockHandle metaindex, index;
    if (!fr.Handle(&metaindex) || !fr.Handle(&index)) return Error("malformed footer");

    // The metaindex holds nothing a checkpoint uses (no filters), but its CRC is checked too,
    // so that no damaged byte outside the footer's padding goes unnoticed.
    LS_RETURN_IF_ERROR(ReadBlock(metaindex, "metaindex").status());
    LS_ASSIGN_OR_RETURN(std::string index_block, ReadBlock(index, "index"));
    std::vector<TableEntry> handles;
    LS_RETURN_IF_ERROR(ParseBlock(index_block, "index", &handles));
    std::vector<TableEntry> entries;
    for (const TableEntry& h : handles) {
      Reader hr(h.value);
      BlockHandle handle;
      if (!hr.Handle(&handle)) return Error("malformed block handle in the index");
      LS_ASSIGN_OR_RETURN(std::string block, ReadBlock(handle, "data"));
      LS_RETURN_IF_ERROR(ParseBlock(block, "data", &entries));
    }
    for (size_t i = 1; i < entries.size(); ++i) {
      if (!(entries[i - 1].key < entries[i].key)) return Error("keys out of order");
    }
    return entries;
  }

 private:
  std::string_view contents_;
  std::string_view file_;
};

}  // namespace

StatusOr<std::vector<TableEntry>> ReadTable(std::string_view contents, std::string_view file) {
  return TableReader(contents, file).Read();
}

}  // namespace lockstep
