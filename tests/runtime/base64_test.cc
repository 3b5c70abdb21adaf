#include "runtime/base64.h"

#include <gtest/gtest.h>

namespace lockstep {
namespace {

TEST(Base64Test, RoundTripsEveryLength) {
  std::string bytes;
  for (int n = 0; n < 70; ++n) {
    StatusOr<std::string> back = Base64Decode(Base64Encode(bytes));
    ASSERT_TRUE(back.ok()) << n;
    EXPECT_EQ(*back, bytes);
    bytes += static_cast<char>(n * 37);
  }
  EXPECT_EQ(Base64Encode("ab"), "YWI=");
  EXPECT_EQ(Base64Encode("abc"), "YWJj");
}

TEST(Base64Test, AcceptsUnpaddedAndUrlSafe) {
  EXPECT_EQ(*Base64Decode("YWI"), "ab");
  EXPECT_EQ(*Base64Decode("-_8="), *Base64Decode("+/8="));
}

TEST(Base64Test, RejectsGarbage) {
  for (const char* bad : {"Y", "YW=I", "YW I", "YW!=", "Y===", "YWJj=="}) {
    EXPECT_EQ(Base64Decode(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace lockstep
