// Gemm (the portable float32 core) and the MatMul / FusedMatMul ops, against float64
// references computed here.
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
#include "tests/runtime/op_test_util.h"

namespace lockstep {
namespace {

using op_test::ExpectError;
using op_test::ExpectNear;
using op_test::kU;
using op_test::RandomFloats;
using op_test::RandomTensor;
using op_test::RunOk;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

double ActivationRef(Activation a, double x) {
  switch (a) {
    case Activation::kNone: return x;
    case Activation::kRelu: return x < 0 ? 0 : x;
    case Activation::kGelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Activation::kTanh: return std::tanh(x);
  }
  return x;
}

// A Gemm problem with its own storage; leading dimensions may exceed the widths.
struct Problem {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t pad = 0;  // extra columns in every leading dimension
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false, residual = false;
  Activation act = Activation::kNone;
  std::vector<float> a, b, c, bias_v, res;

  int64_t lda() const { return (ta ? m : k) + pad; }
  int64_t ldb() const { return (tb ? k : n) + pad; }
  int64_t ldc() const { return n + pad; }
  int64_t ldr() const { return n + 2 * pad + 1; }
  float A(int64_t i, int64_t p) const { return ta ? a[p * lda() + i] : a[i * lda() + p]; }
  float B(int64_t p, int64_t j) const { return tb ? b[j * ldb() + p] : b[p * ldb() + j]; }

  void Fill(uint64_t seed) {
    a = RandomFloats((ta ? k : m) * lda(), seed);
    b = RandomFloats((tb ? n : k) * ldb(), seed + 1);
    c = RandomFloats(m * ldc(), seed + 2);
    bias_v = RandomFloats(n, seed + 3);
    res = RandomFloats(m * ldr(), seed + 4);
  }

  GemmArgs Args(float* out) const {
    GemmArgs g;
    g.transpose_a = ta;
    g.transpose_b = tb;
    g.m = m;
    g.n = n;
    g.k = k;
    g.alpha = alpha;
    g.a = a.data();
    g.lda = lda();
    g.b = b.data();
    g.ldb = ldb();
    g.beta = beta;
    g.c = out;
    g.ldc = ldc();
    g.epilogue.bias = bias ? bias_v.data() : nullptr;
    g.epilogue.activation = act;
    g.epilogue.residual = residual ? res.data() : nullptr;
    g.epilogue.ldr = ldr();
    return g;
  }

  // Runs Gemm on a copy of c and checks every element of C, padding columns included (they
  // must be untouched), against a float64 reference with the documented epilogue order.
  void Check(ThreadPool* pool, const std::string& what) const {
    std::vector<float> out = c;
    Gemm(Args(out.data()), pool);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < ldc(); ++j) {
        const float got = out[i * ldc() + j];
        if (j >= n) {
          ASSERT_EQ(std::memcmp(&got, &c[i * ldc() + j], sizeof got), 0)
              << what << " wrote padding";
          continue;
        }
        double dot = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          dot += double(A(i, p)) * B(p, j);
          mag += std::fabs(double(A(i, p)) * B(p, j));
        }
        double pre = alpha * dot;
        double pre_tol = (k + 2) * kU * std::fabs(alpha) * mag;
        if (beta != 0) {
          pre += double(beta) * c[i * ldc() + j];
          pre_tol += 2 * kU * std::fabs(beta * c[i * ldc() + j]);
        }
        if (bias) {
          pre += bias_v[j];
          pre_tol += kU * (std::fabs(pre) + std::fabs(bias_v[j]));
        }
        double want = ActivationRef(act, pre);
        // The activations' slopes are at most ~1.13 (gelu); their own float evaluation adds
        // a few units of roundoff, absolute for gelu's 1 + erf cancellation.
        double tol = 1.2 * pre_tol + 4 * kU * std::max(1.0, std::fabs(pre));
        if (residual) {
          want += res[i * ldr() + j];
          tol += kU * (std::fabs(want) + std::fabs(res[i * ldr() + j]));
        }
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(got)) << what << " at (" << i << "," << j << "): got " << got;
          continue;
        }
        if (std::isinf(want)) {
          ASSERT_EQ(got, want) << what << " at (" << i << "," << j << ")";
          continue;
        }
        ASSERT_LE(std::fabs(got - want), tol)
            << what << " at (" << i << "," << j << "): got " << got << " want " << want;
      }
    }
  }
};

TEST(GemmTest, AllTransposesAndAwkwardSizes) {
  const int64_t sizes[] = {1, 7, 15, 16, 17, 33};
  uint64_t seed = 1;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (int64_t m : sizes) {
        for (int64_t n : sizes) {
          for (int64_t k : sizes) {
            Problem p;
            p.ta = ta;
            p.tb = tb;
            p.m = m;
            p.n = n;
            p.k = k;
            p.pad = (m + n + k) % 3;  // leading dimensions past the width in two cases of three
            p.Fill(seed++);
            p.Check(nullptr, "ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) +
                                 " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                                 " k=" + std::to_string(k));
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

TEST(GemmTest, AlphaBetaAndEpilogues) {
  uint64_t seed = 100;
  for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu,
                         Activation::kSigmoid, Activation::kTanh}) {
    for (int variant = 0; variant < 8; ++variant) {
      Problem p;
      p.ta = variant & 1;
      p.tb = variant & 2;
      p.m = 17;
      p.n = 33;
      p.k = 15;
      p.pad = 3;
      p.alpha = variant & 4 ? -0.75f : 1.0f;
      p.beta = variant & 4 ? 0.5f : 0.0f;
      p.bias = variant % 3 != 0;
      p.residual = variant % 2 == 1;
      p.act = act;
      p.Fill(seed++);
      p.Check(nullptr, std::string(ActivationName(act)) + " variant " + std::to_string(variant));
    }
  }
}

TEST(GemmTest, BetaZeroNeverReadsC) {
  Problem p;
  p.m = 9;
  p.n = 17;
  p.k = 7;
  p.Fill(7);
  std::vector<float> out(p.c.size(), kNaN);
  Gemm(p.Args(out.data()), nullptr);
  for (float v : out) EXPECT_FALSE(std::isnan(v));
}

TEST(GemmTest, KZeroGivesEpilogueOfZero) {
  Problem p;
  p.m = 5;
  p.n = 7;
  p.k = 0;
  p.beta = 2.0f;
  p.bias = true;
  p.act = Activation::kRelu;
  p.Fill(8);
  p.Check(nullptr, "k=0");
}

TEST(GemmTest, EmptyMOrNWritesNothing) {
  for (auto [m, n] : {std::pair<int64_t, int64_t>{0, 5}, {5, 0}}) {
    Problem p;
    p.m = m;
    p.n = n;
    p.k = 3;
    p.Fill(9);
    std::vector<float> out(16, 42.0f);
    GemmArgs g = p.Args(out.data());
    Gemm(g, nullptr);
    for (float v : out) EXPECT_EQ(v, 42.0f);
  }
}

TEST(GemmTest, NaNAndInfPropagate) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Problem p;
      p.ta = ta;
      p.tb = tb;
      p.m = 9;
      p.n = 19;
      p.k = 11;
      p.Fill(11);
      // Row 2 of A holds a NaN; row 5 an infinity; column 3 of B an infinity and row 7 of A a
      // zero in the same k position, so (7, 3) is 0 * inf = NaN.
      auto set_a = [&](int64_t i, int64_t q, float v) {
        (ta ? p.a[q * p.lda() + i] : p.a[i * p.lda() + q]) = v;
      };
      auto set_b = [&](int64_t q, int64_t j, float v) {
        (tb ? p.b[j * p.ldb() + q] : p.b[q * p.ldb() + j]) = v;
      };
      set_a(2, 4, kNaN);
      set_a(5, 0, kInf);
      set_b(6, 3, kInf);
      set_a(7, 6, 0.0f);
      std::vector<float> out = p.c;
      Gemm(p.Args(out.data()), nullptr);
      for (int64_t j = 0; j < p.n; ++j) EXPECT_TRUE(std::isnan(out[2 * p.ldc() + j])) << j;
      EXPECT_TRUE(std::isnan(out[7 * p.ldc() + 3]));
      // Rows other than 2 and 7 see +-inf in column 3 (sign of their A value at k=6).
      for (int64_t i : {0, 1, 3, 8}) EXPECT_TRUE(std::isinf(out[i * p.ldc() + 3])) << i;
      p.Check(nullptr, "nan/inf");
    }
  }
}

// A larger problem on a pool: same answer as single-threaded, bit for bit, and right.
TEST(GemmTest, ThreadedIsBitIdenticalToSerial) {
  ThreadPool pool(4);
  for (bool tb : {false, true}) {
    Problem p;
    p.tb = tb;
    p.m = 130;
    p.n = 300;
    p.k = 520;  // three K blocks
    p.bias = true;
    p.act = Activation::kGelu;
    p.Fill(21);
    std::vector<float> serial = p.c, threaded = p.c;
    Gemm(p.Args(serial.data()), nullptr);
    Gemm(p.Args(threaded.data()), &pool);
    EXPECT_EQ(std::memcmp(serial.data(), threaded.data(), serial.size() * sizeof(float)), 0);
    p.Check(&pool, "threaded");
  }
}

// Each row of C is computed the same way whatever M is (batch-invariance for serving): a row
// of a 37-row product equals the 1-row product of that row, bit for bit.
TEST(GemmTest, RowsDoNotDependOnBatchSize) {
  Problem full;
  full.m = 37;
  full.n = 45;
  full.k = 300;
  full.bias = true;
  full.act = Activation::kTanh;
  full.Fill(31);
  std::vector<float> all(full.m * full.ldc());
  Gemm(full.Args(all.data()), nullptr);
  for (int64_t i : {0, 5, 36}) {
    GemmArgs one = full.Args(nullptr);
    one.m = 1;
    one.a = full.a.data() + i * full.lda();
    std::vector<float> row(full.n);
    one.c = row.data();
    Gemm(one, nullptr);
    EXPECT_EQ(std::memcmp(row.data(), all.data() + i * full.ldc(), row.size() * sizeof(float)), 0)
        << i;
  }
}

// ---- MatMul / FusedMatMul ----

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
  for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu,
                         Activation::kSigmoid, Activation::kTanh}) {
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
