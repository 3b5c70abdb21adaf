#include "runtime/tensor_json.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

namespace lockstep {
namespace {

TEST(TensorJson, FloatsPrintShortestRoundTripWithPointZero) {
  EXPECT_EQ(FormatFloat(2.5f), "2.5");
  EXPECT_EQ(FormatFloat(3.0f), "3.0");
  EXPECT_EQ(FormatFloat(-0.0f), "-0.0");
  EXPECT_EQ(FormatFloat(0.1f), "0.1");
  EXPECT_EQ(FormatFloat(1e-5f), "1e-05");
  EXPECT_EQ(FormatFloat(1e20f), "1e+20");
  EXPECT_EQ(FormatFloat(16777216.0f), "16777216.0");
  EXPECT_EQ(FormatFloat(std::numeric_limits<float>::quiet_NaN()), "NaN");
  EXPECT_EQ(FormatFloat(std::numeric_limits<float>::infinity()), "Infinity");
  EXPECT_EQ(FormatFloat(-std::numeric_limits<float>::infinity()), "-Infinity");
  std::mt19937 rng(5);
  for (int i = 0; i < 100000; ++i) {
    float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (!std::isfinite(f)) continue;
    ASSERT_EQ(std::bit_cast<uint32_t>(std::strtof(FormatFloat(f).c_str(), nullptr)), std::bit_cast<uint32_t>(f))
        << FormatFloat(f);
  }
}

TEST(TensorJson, WritesNestedLists) {
  std::string out;
  AppendTensorJson(Tensor::FromVector<float>(Shape{2, 2}, {1, 2.5f, -3, 0}), &out);
  EXPECT_EQ(out, "[[1.0, 2.5], [-3.0, 0.0]]");
  out.clear();
  AppendTensorJson(Tensor::FromVector<std::string>(Shape{2}, {"a\"b", "c"}), &out);
  EXPECT_EQ(out, "[\"a\\\"b\", \"c\"]");
  out.clear();
  AppendTensorJson(Tensor::Scalar<int64_t>(-7), &out);
  EXPECT_EQ(out, "-7");
}

TEST(TensorJson, ReadsEveryDtypeAndChecksValues) {
  auto parse = [](const char* text, DType dtype) { return TensorFromJson(*ParseJson(text), dtype); };
  auto f = parse("[[1, 2.5], [3, 4]]", DType::kFloat32);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->shape() == (Shape{2, 2}));
  EXPECT_EQ(f->data<float>()[1], 2.5f);
  EXPECT_EQ(parse("[true, false]", DType::kBool)->data<bool>()[0], true);
  EXPECT_EQ(parse("[\"x\"]", DType::kString)->data<std::string>()[0], "x");
  EXPECT_EQ(parse("[2147483647]", DType::kInt32)->data<int32_t>()[0], 2147483647);
  EXPECT_FALSE(parse("[2147483648]", DType::kInt32).ok());
  EXPECT_FALSE(parse("[1.5]", DType::kInt64).ok());
  EXPECT_FALSE(parse("[1e300]", DType::kFloat32).ok());
  EXPECT_FALSE(parse("[[1], [2, 3]]", DType::kFloat32).ok());
  EXPECT_FALSE(parse("[[1], 2]", DType::kFloat32).ok());
  EXPECT_FALSE(parse("[\"1\"]", DType::kFloat32).ok());
  EXPECT_EQ(parse("[1.0]", DType::kBFloat16)->data<bfloat16>()[0].bits, 0x3f80);
  EXPECT_TRUE(parse("[]", DType::kFloat32)->shape() == Shape{0});
}

// Found by the rest_request fuzzer (corpus seed "extremes"): the server wrote -FLT_MAX as
// -3.4028235e+38, its shortest text, and refused that text when it came back, because as a
// double it lies past FLT_MAX. A number is out of range only when it rounds to infinity.
TEST(TensorJson, NumbersThatRoundToTheLargestFloatAreThatFloat) {
  auto parse = [](const std::string& text, DType dtype) { return TensorFromJson(*ParseJson(text), dtype); };
  const float max = std::numeric_limits<float>::max();
  std::string text;
  AppendTensorJson(Tensor::FromVector<float>(Shape{2}, {max, -max}), &text);
  EXPECT_EQ(text, "[3.4028235e+38, -3.4028235e+38]");
  auto read = parse(text, DType::kFloat32);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->data<float>()[0], max);
  EXPECT_EQ(read->data<float>()[1], -max);
  // 2^128 - 2^103 is halfway between FLT_MAX and 2^128, and rounds (to even) to infinity.
  EXPECT_EQ(parse("[3.4028235677973362e38]", DType::kFloat32)->data<float>()[0], max);
  EXPECT_FALSE(parse("[3.4028235677973366e38]", DType::kFloat32).ok());
  EXPECT_FALSE(parse("[-3.4028235677973366e38]", DType::kFloat32).ok());
  // bfloat16's largest finite value is about 3.3895e38; past it a number would round to
  // infinity, which no number means.
  EXPECT_EQ(parse("[3.3895314e38]", DType::kBFloat16)->data<bfloat16>()[0].bits, 0x7f7f);
  EXPECT_FALSE(parse("[3.4e38]", DType::kBFloat16).ok());
  EXPECT_EQ(parse("[-Infinity]", DType::kBFloat16)->data<bfloat16>()[0].bits, 0xff80);
}

TEST(TensorJson, Float64KeepsEveryDigitBothWays) {
  auto d = TensorFromJson(*ParseJson("[0.1, 1e300, -2, NaN, -Infinity]"), DType::kFloat64);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->data<double>()[0], 0.1);
  EXPECT_EQ(d->data<double>()[1], 1e300) << "beyond float's range is fine for float64";
  EXPECT_TRUE(std::isnan(d->data<double>()[3]));
  EXPECT_EQ(d->data<double>()[4], -std::numeric_limits<double>::infinity());
  std::string out;
  AppendTensorJson(*d, &out);
  EXPECT_EQ(out, "[0.1, 1e+300, -2.0, NaN, -Infinity]");
  out.clear();
  AppendTensorJson(Tensor::Scalar<double>(0.1 + 0.2), &out);
  EXPECT_EQ(out, "0.30000000000000004");
}

TEST(TensorJson, RefusesDeepNestingBeforeParsing) {
  EXPECT_FALSE(ParseJson(std::string(100000, '[') + std::string(100000, ']')).ok());
  EXPECT_TRUE(ParseJson("[[[1]]]").ok());
  // Brackets inside strings do not count.
  EXPECT_TRUE(ParseJson("[\"" + std::string(1000, '[') + "\"]").ok());
  EXPECT_FALSE(ParseJson("[1,").ok());
}

}  // namespace
}  // namespace lockstep
