#include "runtime/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

namespace lockstep {

// Intel's ISA-L (Debian's libisal) picks the fastest kernel the CPU has at run time: the SSE4.2
// CRC32 instruction on three interleaved streams, or carry-less multiplication, several GB/s
// where a table-driven loop runs about 1 (bench/runtime/crc32c_bench.cc). Its crc32_iscsi
// neither inverts the initial value nor the result, as the CRC-32C definition does.
uint32_t Crc32c(std::string_view data, uint32_t crc) {
  auto* p = reinterpret_cast<unsigned char*>(const_cast<char*>(data.data()));  // read only
  size_t n = data.size();
  uint32_t raw = ~crc;
  while (n > 0) {
    const int len = static_cast<int>(std::min<size_t>(n, INT_MAX));  // its length is an int
    raw = crc32_iscsi(p, len, raw);
    p += len;
    n -= static_cast<size_t>(len);
  }
  return ~raw;
}

}  // namespace lockstep
