#include "runtime/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace lockstep {
namespace {

// Check values from RFC 3720 (iSCSI), appendix B.4, and the usual "123456789".
TEST(Crc32cTest, KnownValues) {
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32c("123456789"), 0xe3069283u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8a9136aau);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62a8ab43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending += static_cast<char>(i);
  EXPECT_EQ(Crc32c(ascending), 0x46dd794eu);
}

TEST(Crc32cTest, ContinuesAcrossPiecesAtEveryCut) {
  std::string data;
  for (int i = 0; i < 100; ++i) data += static_cast<char>(i * 37 + 11);
  const uint32_t whole = Crc32c(data);
  for (size_t cut = 0; cut <= data.size(); ++cut) {
    EXPECT_EQ(Crc32c(std::string_view(data).substr(cut), Crc32c(std::string_view(data).substr(0, cut))),
              whole)
        << cut;
  }
}

// The CRC by its definition, one bit at a time: the library's kernels differ by length and
// alignment (a byte loop, 8-byte words, three interleaved streams, folding), so each is
// checked against it.
uint32_t BitwiseCrc32c(std::string_view data) {
  uint32_t crc = ~0u;
  for (const char c : data) {
    crc ^= static_cast<unsigned char>(c);
    for (int k = 0; k < 8; ++k) crc = (crc & 1) != 0 ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;
  }
  return ~crc;
}

TEST(Crc32cTest, MatchesTheDefinitionAtEveryLengthAndAlignment) {
  std::string data(8192 + 64, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 2654435761u >> 13);
  for (size_t offset = 0; offset < 16; ++offset) {
    for (size_t length : {0, 1, 3, 7, 8, 15, 16, 31, 64, 127, 128, 255, 256, 511, 1024, 3000, 4096, 8192}) {
      const std::string_view piece = std::string_view(data).substr(offset, length);
      EXPECT_EQ(Crc32c(piece), BitwiseCrc32c(piece)) << offset << " " << length;
    }
  }
}

TEST(Crc32cTest, MaskRoundTrips) {
  for (uint32_t crc : {0u, 1u, 0xe3069283u, 0xffffffffu}) EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(crc)), crc);
  EXPECT_NE(MaskCrc32c(0xe3069283u), 0xe3069283u);
}

}  // namespace
}  // namespace lockstep
