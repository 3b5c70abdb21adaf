// Shadow answers are compared with the primary's: equal within 1e-5 relative for floats, equal
// for the rest, every output the primary returned present with its dtype and shape.
#include "server/shadow.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace lockstep {
namespace {

NamedTensor Floats(const std::string& name, std::vector<float> v) {
  return {name, Tensor::FromVector<float>(Shape{static_cast<int64_t>(v.size())}, v)};
}

bool Agrees(const std::vector<NamedTensor>& primary, const std::vector<NamedTensor>& candidate) {
  return ShadowAgrees(primary, candidate);
}

TEST(ShadowAgreesTest, ComparesEveryOutputTheClientGot) {
  const std::vector<NamedTensor> primary = {Floats("y", {1.0f, 100.0f, NAN}),
                                            {"k", Tensor::FromVector<int64_t>(Shape{2}, {3, 4})}};
  std::vector<NamedTensor> same = {{"k", Tensor::FromVector<int64_t>(Shape{2}, {3, 4})},
                                   Floats("y", {1.000001f, 100.0005f, NAN}),
                                   Floats("extra", {5.0f})};
  EXPECT_TRUE(Agrees(primary, same));
  EXPECT_FALSE(Agrees(primary, {Floats("y", {1.0f, 100.1f, NAN}), same[0]}));
  EXPECT_FALSE(Agrees(primary, {Floats("y", {1.0f, 100.0f, 0.0f}), same[0]}));
  EXPECT_FALSE(Agrees(primary, {Floats("y", {1.0f, 100.0f, NAN})}));  // "k" missing
  EXPECT_FALSE(Agrees(primary, {Floats("y", {1.0f, 100.0f}), same[0]}));
  EXPECT_FALSE(Agrees(
      primary, {Floats("y", {1.0f, 100.0f, NAN}), {"k", Tensor::FromVector<int64_t>(Shape{2}, {3, 5})}}));
  EXPECT_FALSE(Agrees(primary, {Floats("y", {1.0f, 100.0f, NAN}), Floats("k", {3.0f, 4.0f})}));
  EXPECT_TRUE(Agrees({}, same));
}

}  // namespace
}  // namespace lockstep
