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

TEST(Crc32cTest, MaskRoundTrips) {
  for (uint32_t crc : {0u, 1u, 0xe3069283u, 0xffffffffu}) EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(crc)), crc);
  EXPECT_NE(MaskCrc32c(0xe3069283u), 0xe3069283u);
}

}  // namespace
}  // namespace lockstep
