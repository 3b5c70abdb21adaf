// The MatMul / FusedMatMul ops, against float64 references computed here (the matmul core
// itself is tested in gemm_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/activation.h"
#include "runtime/matmul/gemm.h"
#include "runtime/op_registry.h"
#include "tests/runtime/gemm_test_util.h"
#include "tests/runtime/op_test_util.h"

namespace lockstep {
namespace {

using op_test::ExpectError;
using op_test::ExpectNear;
using op_test::kU;
using op_test::RandomFloats;
using op_test::RandomTensor;
using op_test::RunOk;

using gemm_test::ActivationRef;


std::vector<double> MatMulRef(const Tensor& a, const Tensor& b, bool ta, bool tb,
                              std::vector<double>* tol) {
  const int64_t m = a.shape()[ta ? 1 : 0], k = a.shape()[ta ? 0 : 1];
  const int64_t n = b.shape()[tb ? 0 : 1];
  auto A = [&](int64_t i, int64_t p) {
    return double(a.data<float>()[ta ? p * m + i : i * k + p]);
  };
  auto B = [&](int64_t p, int64_t j) {
    return double(b.data<float>()[tb ? j * k + p : p * n + j]);
  };
  std::vector<double> out(m * n);
  tol->assign(m * n, 0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        s += A(i, p) * B(p, j);
        mag += std::fabs(A(i, p) * B(p, j));
      }
      out[i * n + j] = s;
      (*tol)[i * n + j] = (k + 1) * kU * mag;
    }
  }
  return out;
}

TEST(OpsMatMulTest, MatchesReferenceForAllTransposes) {
  uint64_t seed = 40;
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                         {1, 17, 33},
                         {7, 15, 16},
                         {33, 7, 1},
                         {0, 5, 3},
                         {4, 0, 6},
                         {65, 70, 260}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        Tensor a = RandomTensor(ta ? Shape{k, m} : Shape{m, k}, seed++);
        Tensor b = RandomTensor(tb ? Shape{n, k} : Shape{k, n}, seed++);
        auto out = RunOk("MatMul", {a, b}, {{"transpose_a", ta}, {"transpose_b", tb}});
        ASSERT_EQ(out.size(), 1u);
        std::vector<double> tol;
        std::vector<double> want = MatMulRef(a, b, ta, tb, &tol);
        ExpectNear(out[0], Shape{m, n}, want, tol, "MatMul");
      }
    }
  }
}

TEST(OpsMatMulTest, ShapeErrorsAreClear) {
  Tensor a = RandomTensor({2, 3}, 1), b = RandomTensor({4, 5}, 2);
  ExpectError(RunOp("MatMul", std::vector<Tensor>{a, b}).status(), StatusCode::kInvalidArgument,
              "MatMul: inner dimensions differ: [2,3] x [4,5]");
  ExpectError(RunOp("MatMul", std::vector<Tensor>{RandomTensor({2, 3, 4}, 3), b}).status(),
              StatusCode::kInvalidArgument, "rank-2");
  ExpectError(
      RunOp("MatMul", std::vector<Tensor>{a, Tensor::FromVector<int32_t>({3, 1}, {1, 2, 3})})
          .status(),
      StatusCode::kInvalidArgument, "float32");
  ExpectError(
      RunOp("FusedMatMul", std::vector<Tensor>{a, RandomTensor({3, 5}, 4), RandomTensor({4}, 5)})
          .status(),
      StatusCode::kInvalidArgument, "bias length 4");
  ExpectError(RunOp("FusedMatMul", std::vector<Tensor>{a, RandomTensor({3, 5}, 4)},
                    {{"activation", std::string("swish")}})
                  .status(),
              StatusCode::kInvalidArgument, "swish");
  // transpose_b makes [4,5] x [6,5] fine and [2,3] x [4,5] still wrong, and says so.
  ExpectError(RunOp("MatMul", std::vector<Tensor>{a, b}, {{"transpose_b", true}}).status(),
              StatusCode::kInvalidArgument, "transpose_b");
}

// bfloat16 inputs (either or both) make a bf16 product with float32 output: the reference
// takes the inputs rounded to bf16, the float32 accumulation bound is unchanged.
TEST(OpsMatMulTest, AcceptsBfloat16Inputs) {
  auto to_bf16 = [](const Tensor& t) {
    Tensor out(DType::kBFloat16, t.shape());
    FloatToBfloat16(t.data<float>(), out.mutable_data<bfloat16>());
    return out;
  };
  auto rounded = [](const Tensor& t) {
    std::vector<float> v(t.data<float>().begin(), t.data<float>().end());
    for (float& x : v) x = gemm_test::RoundToBf16(x);
    return Tensor::FromVector<float>(t.shape(), v);
  };
  Tensor a = RandomTensor({9, 21}, 70), b = RandomTensor({21, 40}, 71);
  std::vector<double> tol;
  std::vector<double> want = MatMulRef(rounded(a), rounded(b), false, false, &tol);
  for (auto [a_in, b_in] : {std::pair{to_bf16(a), to_bf16(b)}, std::pair{to_bf16(a), b}, std::pair{a, to_bf16(b)}}) {
    Tensor out = RunOk("MatMul", {a_in, b_in}).at(0);
    EXPECT_EQ(out.dtype(), DType::kFloat32);
    ExpectNear(out, Shape{9, 40}, want, tol, "bf16 MatMul");
  }
}

TEST(OpsMatMulTest, InfersUnknownDimensions) {
  auto out = op_test::Infer("MatMul", {{DType::kFloat32, {-1, 3}}, {DType::kFloat32, {3, 8}}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape, (Shape{-1, 8}));
  out = op_test::Infer("MatMul", {{DType::kFloat32, {-1, -1}}, {DType::kFloat32, {8, 4}}},
                       {{"transpose_b", true}});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{-1, 8}));
  out = op_test::Infer(
      "FusedMatMul",
      {{DType::kFloat32, {5, 3}}, {DType::kFloat32, {3, -1}}, {DType::kFloat32, {7}}});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].shape, (Shape{5, 7}));
}

// Inference with unknown dimensions cannot catch everything; the kernel re-checks the real
// shapes instead of trusting it.
TEST(OpsMatMulTest, KernelRechecksShapes) {
  const OpDef* op = OpRegistry::Global().Find("MatMul");
  ASSERT_NE(op, nullptr);
  Tensor a = RandomTensor({2, 3}, 1), b = RandomTensor({4, 5}, 2);
  const Tensor* inputs[] = {&a, &b};
  std::vector<Tensor> outputs(1);
  AttrMap attrs;
  KernelContext ctx(inputs, attrs, ThreadPool::Default(), outputs, nullptr);
  ExpectError(op->compute(ctx), StatusCode::kInvalidArgument, "inner dimensions differ");
}

TEST(OpsMatMulTest, FusedIsBitIdenticalToUnfused) {
  const char* act_ops[] = {nullptr, "Relu", "Gelu", "Sigmoid", "Tanh"};
  const char* act_names[] = {"none", "relu", "gelu", "sigmoid", "tanh"};
  uint64_t seed = 60;
  for (auto [m, k, n] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 7, 17}, {33, 15, 16}, {0, 4, 3}, {70, 300, 130}}) {
    for (int a_i = 0; a_i < 5; ++a_i) {
      for (bool tb : {false, true}) {
        for (bool with_bias : {false, true}) {
          Tensor a = RandomTensor({m, k}, seed++, -3, 3);
          Tensor b = RandomTensor(tb ? Shape{n, k} : Shape{k, n}, seed++, -3, 3);
          Tensor bias = RandomTensor({n}, seed++, -3, 3);
          AttrMap mm_attrs{{"transpose_b", tb}};
          Tensor unfused = RunOk("MatMul", {a, b}, mm_attrs).at(0);
          if (with_bias) unfused = RunOk("BiasAdd", {unfused, bias}).at(0);
          if (act_ops[a_i] != nullptr) unfused = RunOk(act_ops[a_i], {unfused}).at(0);
          AttrMap fused_attrs{{"transpose_b", tb}, {"activation", std::string(act_names[a_i])}};
          std::vector<Tensor> inputs{a, b};
          if (with_bias) inputs.push_back(bias);
          Tensor fused = RunOk("FusedMatMul", inputs, fused_attrs).at(0);
          EXPECT_TRUE(fused.BitwiseEqual(unfused))
              << act_names[a_i] << " m=" << m << " bias=" << with_bias << " tb=" << tb;
        }
      }
    }
  }
}

TEST(OpsMatMulTest, FusedMatchesReference) {
  Tensor a = RandomTensor({17, 33}, 70), b = RandomTensor({33, 7}, 71),
         bias = RandomTensor({7}, 72);
  for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu, Activation::kSigmoid,
                         Activation::kTanh, Activation::kRelu6, Activation::kElu, Activation::kSelu,
                         Activation::kSilu, Activation::kHardSwish}) {
    Tensor out =
        RunOk("FusedMatMul", {a, b, bias}, {{"activation", std::string(ActivationName(act))}})
            .at(0);
    std::vector<double> tol;
    std::vector<double> want = MatMulRef(a, b, false, false, &tol);
    for (size_t i = 0; i < want.size(); ++i) {
      const double pre = want[i] + bias.data<float>()[i % 7];
      want[i] = ActivationRef(act, pre);
      tol[i] = 1.2 * (tol[i] + kU * std::fabs(pre)) + 4 * kU * std::max(1.0, std::fabs(pre));
    }
    ExpectNear(out, Shape{17, 7}, want, tol, ActivationName(act));
  }
}

}  // namespace
}  // namespace lockstep
