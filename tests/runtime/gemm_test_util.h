// A Gemm problem with its own storage, and its check against a float64 reference, for the
// matmul core's tests.
//
// The reference takes the inputs as the product sees them: bf16-rounded when the compute type
// is bf16. Tolerance: one float32 accumulator per element taking K terms in a fixed order is
// off by at most gamma_K * sum |a_i b_i| with gamma_K ~ K u (u = 2^-24), whatever the input
// precision (bf16 products are exact in float32); we allow (K + 2) u. The epilogue adds a few
// u per float operation; the activations' own float evaluation a few more.
#pragma once

#include <algorithm>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/activation.h"
#include "runtime/bfloat16.h"
#include "runtime/matmul/gemm.h"
#include "tests/runtime/op_test_util.h"

namespace lockstep::gemm_test {

using op_test::kU;

inline double ActivationRef(Activation a, double x) {
  switch (a) {
    case Activation::kNone: return x;
    case Activation::kRelu: return x < 0 ? 0 : x;
    case Activation::kGelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Activation::kTanh: return std::tanh(x);
    case Activation::kRelu6: return x < 0 ? 0 : (x > 6 ? 6 : x);
    case Activation::kElu: return x > 0 ? x : std::expm1(x);
    case Activation::kSelu:
      return 1.0507009873554804934193349852946 * (x > 0 ? x : 1.6732632423543772848170429916717 * std::expm1(x));
    case Activation::kSilu: return x / (1.0 + std::exp(-x));
    case Activation::kHardSwish: return x * std::clamp(x / 6 + 0.5, 0.0, 1.0);
  }
  return x;
}

inline float RoundToBf16(float x) { return Bfloat16ToFloat(FloatToBfloat16(x)); }

struct Problem {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t pad = 0;  // extra columns in every leading dimension
  DType a_type = DType::kFloat32, b_type = DType::kFloat32;
  bool packed = false;  // pass B as a PackedB (compute type: bf16 when either operand is)
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false, residual = false;
  Activation act = Activation::kNone;
  // a and b hold the stored values (already bf16-exact when the type is bf16).
  std::vector<float> a, b, c, bias_v, res;
  std::vector<bfloat16> a16, b16;
  PackedB packed_b;

  bool bf16() const { return a_type == DType::kBFloat16 || b_type == DType::kBFloat16; }
  int64_t lda() const { return (ta ? m : k) + pad; }
  int64_t ldb() const { return (tb ? k : n) + pad; }
  int64_t ldc() const { return n + pad; }
  int64_t ldr() const { return n + 2 * pad + 1; }
  float& A(int64_t i, int64_t p) { return ta ? a[p * lda() + i] : a[i * lda() + p]; }
  float& B(int64_t p, int64_t j) { return tb ? b[j * ldb() + p] : b[p * ldb() + j]; }
  // What the product multiplies.
  double SeenA(int64_t i, int64_t p) {
    return bf16() ? RoundToBf16(A(i, p)) : A(i, p);
  }
  double SeenB(int64_t p, int64_t j) {
    return bf16() ? RoundToBf16(B(p, j)) : B(p, j);
  }

  void Fill(uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
    a = op_test::RandomFloats((ta ? k : m) * lda(), seed, lo, hi);
    b = op_test::RandomFloats((tb ? n : k) * ldb(), seed + 1, lo, hi);
    c = op_test::RandomFloats(m * ldc(), seed + 2);
    bias_v = op_test::RandomFloats(n, seed + 3);
    res = op_test::RandomFloats(m * ldr(), seed + 4);
    Sync();
  }

  // Makes the bf16 copies (and the float values bf16-exact) after a and b change.
  void Sync() {
    auto to16 = [](std::vector<float>& v, std::vector<bfloat16>& out) {
      out.resize(v.size());
      for (size_t i = 0; i < v.size(); ++i) {
        out[i] = FloatToBfloat16(v[i]);
        v[i] = Bfloat16ToFloat(out[i]);
      }
    };
    if (a_type == DType::kBFloat16) to16(a, a16);
    if (b_type == DType::kBFloat16) to16(b, b16);
    if (packed) {
      packed_b = PackedB::Pack(BData(), b_type, tb, k, n, ldb(),
                               bf16() ? DType::kBFloat16 : DType::kFloat32);
    }
  }

  const void* AData() const {
    return a_type == DType::kBFloat16 ? static_cast<const void*>(a16.data()) : a.data();
  }
  const void* BData() const {
    return b_type == DType::kBFloat16 ? static_cast<const void*>(b16.data()) : b.data();
  }

  GemmArgs Args(float* out) const {
    GemmArgs g;
    g.transpose_a = ta;
    g.transpose_b = tb;
    g.m = m;
    g.n = n;
    g.k = k;
    g.alpha = alpha;
    g.a = AData();
    g.a_type = a_type;
    g.lda = lda();
    if (packed) {
      g.packed_b = &packed_b;
    } else {
      g.b = BData();
      g.b_type = b_type;
      g.ldb = ldb();
    }
    g.beta = beta;
    g.c = out;
    g.ldc = ldc();
    g.epilogue.bias = bias ? bias_v.data() : nullptr;
    g.epilogue.activation = act;
    g.epilogue.residual = residual ? res.data() : nullptr;
    g.epilogue.ldr = ldr();
    return g;
  }

  std::string Describe() const {
    return "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
           " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " a=" +
           std::string(DTypeName(a_type)) + " b=" + std::string(DTypeName(b_type)) +
           (packed ? " packed" : "") + " pad=" + std::to_string(pad);
  }

  // Runs Gemm on a copy of c and checks every element of C, padding columns included (they
  // must be untouched), against the float64 reference with the documented epilogue order.
  // Returns the result.
  std::vector<float> Check(ThreadPool* pool, const std::string& what) {
    std::vector<float> out = c;
    Gemm(Args(out.data()), pool);
    const std::string where = what + " [" + Describe() + "]";
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < ldc(); ++j) {
        const float got = out[i * ldc() + j];
        if (j >= n) {
          EXPECT_EQ(std::memcmp(&got, &c[i * ldc() + j], sizeof got), 0) << where << " wrote padding";
          continue;
        }
        double dot = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
          dot += SeenA(i, p) * SeenB(p, j);
          mag += std::fabs(SeenA(i, p) * SeenB(p, j));
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
        if (residual) {
          pre += res[i * ldr() + j];
          pre_tol += kU * (std::fabs(pre) + std::fabs(res[i * ldr() + j]));
        }
        const double want = ActivationRef(act, pre);
        // The activations' slopes are at most ~1.13 (gelu); their own float evaluation adds
        // a few units of roundoff, absolute for gelu's 1 + erf cancellation.
        const double tol = 1.2 * pre_tol + 4 * kU * std::max(1.0, std::fabs(pre));
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << where << " at (" << i << "," << j << "): got " << got;
        } else if (std::isinf(want)) {
          EXPECT_EQ(got, want) << where << " at (" << i << "," << j << ")";
        } else {
          EXPECT_LE(std::fabs(got - want), tol)
              << where << " at (" << i << "," << j << "): got " << got << " want " << want;
        }
        if (::testing::Test::HasFailure()) return out;
      }
    }
    return out;
  }
};

inline bool BitwiseEqual(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

}  // namespace lockstep::gemm_test
