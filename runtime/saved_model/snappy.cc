#include "runtime/saved_model/snappy.h"

#include <cstdint>

namespace lockstep {
namespace {

Status Malformed(std::string_view what) {
  return InvalidArgument("snappy: " + std::string(what));
}

// Reads `n` little-endian bytes at `pos`; false when they run past the end.
bool ReadLittleEndian(std::string_view in, size_t& pos, int n, uint32_t* value) {
  if (in.size() - pos < static_cast<size_t>(n)) return false;
  uint32_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint32_t{static_cast<uint8_t>(in[pos + i])} << (8 * i);
  pos += n;
  *value = v;
  return true;
}

}  // namespace

StatusOr<std::string> SnappyUncompress(std::string_view in, size_t max_size) {
  size_t pos = 0;
  uint64_t length = 0;
  for (int shift = 0;; shift += 7) {
    if (pos == in.size() || shift > 28) return Malformed("bad length header");
    const uint8_t byte = static_cast<uint8_t>(in[pos++]);
    length |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) break;
  }
  if (length > max_size) {
    return Malformed("uncompressed length " + std::to_string(length) + " exceeds the limit of " +
                     std::to_string(max_size));
  }
  std::string out;
  out.reserve(length);
  while (pos < in.size()) {
    const uint8_t tag = static_cast<uint8_t>(in[pos++]);
    uint32_t len = 0;
    uint32_t offset = 0;
    switch (tag & 3) {
      case 0: {  // literal
        len = tag >> 2;
        if (len >= 60) {
          const int bytes = static_cast<int>(len) - 59;
          if (!ReadLittleEndian(in, pos, bytes, &len)) return Malformed("truncated literal length");
        }
        const uint64_t n = uint64_t{len} + 1;
        if (in.size() - pos < n) return Malformed("literal runs past the input");
        if (length - out.size() < n) return Malformed("literal runs past the stated length");
        out.append(in.substr(pos, n));
        pos += n;
        continue;
      }
      case 1:  // copy, 11-bit offset
        if (pos == in.size()) return Malformed("truncated copy");
        len = 4 + ((tag >> 2) & 7);
        offset = (static_cast<uint32_t>(tag >> 5) << 8) | static_cast<uint8_t>(in[pos++]);
        break;
      case 2:  // copy, 16-bit offset
        len = (tag >> 2) + 1;
        if (!ReadLittleEndian(in, pos, 2, &offset)) return Malformed("truncated copy");
        break;
      default:  // copy, 32-bit offset
        len = (tag >> 2) + 1;
        if (!ReadLittleEndian(in, pos, 4, &offset)) return Malformed("truncated copy");
        break;
    }
    if (offset == 0 || offset > out.size()) return Malformed("copy offset outside the output");
    if (length - out.size() < len) return Malformed("copy runs past the stated length");
    // Byte by byte: a copy may overlap what it writes (offset < len repeats a pattern).
    const size_t from = out.size() - offset;
    for (uint32_t i = 0; i < len; ++i) out.push_back(out[from + i]);
  }
  if (out.size() != length) return Malformed("output is shorter than its stated length");
  return out;
}

}  // namespace lockstep
