// CRC-32C of the records a TFRecord reader checks, from a 64-byte record to a 16 MiB block:
// runtime/'s Crc32c (ISA-L) beside the table-driven loop it replaced ("slicing by 8", eight
// 256-entry tables, the portable way), measured in the same run.
//
//   build/bench/bench_crc32c [--benchmark_min_time=0.5]
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <string>

#include "runtime/crc32c.h"

namespace {

constexpr std::array<std::array<uint32_t, 256>, 8> MakeTables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (size_t s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
  return t;
}
constexpr auto kTables = MakeTables();

uint32_t SlicingBy8(std::string_view data) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  size_t n = data.size();
  uint32_t crc = ~0u;
  while (n >= 8) {
    const uint32_t lo = crc ^ (uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24);
    crc = kTables[7][lo & 0xff] ^ kTables[6][(lo >> 8) & 0xff] ^ kTables[5][(lo >> 16) & 0xff] ^
          kTables[4][lo >> 24] ^ kTables[3][p[4]] ^ kTables[2][p[5]] ^ kTables[1][p[6]] ^ kTables[0][p[7]];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) crc = (crc >> 8) ^ kTables[0][(crc ^ *p++) & 0xff];
  return ~crc;
}

std::string Data(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 131 + 7);
  return s;
}

template <uint32_t (*Crc)(std::string_view)>
void BM_Crc(benchmark::State& state) {
  const std::string data = Data(static_cast<size_t>(state.range(0)));
  // The two must agree, or the comparison means nothing.
  if (Crc(data) != lockstep::Crc32c(data)) state.SkipWithError("the CRCs differ");
  for (auto _ : state) benchmark::DoNotOptimize(Crc(data));
  state.SetBytesProcessed(state.iterations() * state.range(0));
}

uint32_t Lockstep(std::string_view data) { return lockstep::Crc32c(data); }

BENCHMARK(BM_Crc<Lockstep>)->Name("Crc32c/isal")->Arg(64)->Arg(1 << 10)->Arg(64 << 10)->Arg(16 << 20);
BENCHMARK(BM_Crc<SlicingBy8>)->Name("Crc32c/slicing_by_8")->Arg(64)->Arg(1 << 10)->Arg(64 << 10)->Arg(16 << 20);

}  // namespace

BENCHMARK_MAIN();
