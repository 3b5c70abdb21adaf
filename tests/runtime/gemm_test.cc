// The matmul core (runtime/matmul/gemm.h) on every instruction-set path this CPU can run (the
// portable one always): float64 references, awkward sizes, every transpose, leading
// dimensions past the width, alpha/beta, every epilogue, bf16 and float32 and mixed inputs,
// packed and unpacked B, NaN and infinity, threads and batch invariance, and bit-for-bit
// agreement between the paths.
#include <gtest/gtest.h>

#include <array>

#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "runtime/matmul/gemm.h"
#include "runtime/matmul/gemm_path.h"
#include "tests/runtime/gemm_test_util.h"
#include "tests/runtime/op_test_util.h"

namespace lockstep {

// Test names and failure messages show the path by name.
void PrintTo(GemmPath path, std::ostream* os) { *os << GemmPathName(path); }

namespace {

using gemm_test::BitwiseEqual;
using gemm_test::Problem;

using op_test::kInf;
using op_test::kNaN;
constexpr DType kF32 = DType::kFloat32;
constexpr DType kBf16 = DType::kBFloat16;

// Input types: both float32, both bf16, and each mix (a bf16 product either way).
const std::pair<DType, DType> kTypeMixes[] = {{kF32, kF32}, {kBf16, kBf16}, {kBf16, kF32}, {kF32, kBf16}};

// Runs each test on one path, restoring the active path afterwards.
class GemmPathTest : public ::testing::TestWithParam<GemmPath> {
 protected:
  void SetUp() override {
    saved_ = ActiveGemmPath();
    if (!GemmPathSupported(GetParam())) {
      GTEST_SKIP() << "this CPU cannot run the " << GemmPathName(GetParam()) << " path";
    }
    ASSERT_TRUE(SetGemmPath(GetParam()).ok());
  }
  void TearDown() override { ASSERT_TRUE(SetGemmPath(saved_).ok()); }

 private:
  GemmPath saved_ = GemmPath::kPortable;
};

TEST_P(GemmPathTest, AwkwardSizesEveryTransposeEveryType) {
  const int64_t sizes[] = {1, 7, 15, 16, 17, 31, 33};
  std::mt19937_64 rng(GTEST_FLAG_GET(random_seed) + 1);
  auto pick = [&] { return sizes[rng() % std::size(sizes)]; };
  uint64_t seed = 1;
  for (auto [at, bt] : kTypeMixes) {
    for (int variant = 0; variant < 4; ++variant) {
      // Each dimension at 1 once, then random picks from the awkward sizes.
      for (int trial = 0; trial < 10; ++trial) {
        Problem p;
        p.ta = variant & 1;
        p.tb = variant & 2;
        p.m = trial == 0 ? 1 : pick();
        p.n = trial == 1 ? 1 : pick();
        p.k = trial == 2 ? 1 : pick();
        p.a_type = at;
        p.b_type = bt;
        p.packed = trial % 2 == 1;
        p.pad = trial % 3;  // leading dimensions past the width in two trials of three
        p.Fill(seed++);
        p.Check(nullptr, "sizes");
        if (HasFailure()) return;
      }
    }
  }
}

// Past one register tile, one task and one K block (bf16 K blocks are 2048 elements,
// float32 ones 1024), with the tails at odd places; both loop orders of a task (strips
// sweeping all panels when B's block is small, panel after panel otherwise), half panels,
// and A packed once for tasks that share all its rows (N past one task's 64 panels).
TEST_P(GemmPathTest, LargeSizes) {
  const std::tuple<int64_t, int64_t, int64_t> shapes[] = {
      {255, 257, 33}, {257, 33, 255}, {1, 257, 255}, {40, 2051, 37},
      {13, 1100, 70}, {5, 2100, 70}, {30, 2100, 20}, {256, 10, 100}, {30, 7, 2100}};
  uint64_t seed = 500;
  for (auto [m, k, n] : shapes) {
    for (auto [at, bt] : {kTypeMixes[0], kTypeMixes[1]}) {
      Problem p;
      p.m = m;
      p.k = k;
      p.n = n;
      p.ta = seed % 2 == 1;
      p.tb = seed % 3 == 1;
      p.a_type = at;
      p.b_type = bt;
      p.packed = seed % 2 == 0;
      p.pad = 1;
      p.Fill(seed++);
      p.Check(nullptr, "large");
      if (HasFailure()) return;
    }
  }
}

TEST_P(GemmPathTest, AlphaBetaAndEveryEpilogue) {
  uint64_t seed = 100;
  for (DType type : {kF32, kBf16}) {
    for (Activation act : {Activation::kNone, Activation::kRelu, Activation::kGelu,
                           Activation::kSigmoid, Activation::kTanh}) {
      for (int variant = 0; variant < 8; ++variant) {
        Problem p;
        p.ta = variant & 1;
        p.tb = variant & 2;
        p.m = 17;
        p.n = 65;  // two whole panels and a partial one
        p.k = 15;
        p.pad = 3;
        p.a_type = p.b_type = type;
        p.packed = variant % 3 == 0;
        p.alpha = variant & 4 ? -0.75f : 1.0f;
        p.beta = variant & 4 ? 0.5f : 0.0f;
        p.bias = variant % 3 != 0;
        p.residual = variant % 2 == 1;
        p.act = act;
        p.Fill(seed++);
        p.Check(nullptr, std::string(ActivationName(act)) + " variant " + std::to_string(variant));
        if (HasFailure()) return;
      }
    }
  }
}

TEST_P(GemmPathTest, BetaZeroNeverReadsC) {
  for (DType type : {kF32, kBf16}) {
    Problem p;
    p.m = 9;
    p.n = 70;
    p.k = 7;
    p.a_type = p.b_type = type;
    p.Fill(7);
    std::vector<float> out(p.c.size(), kNaN);
    Gemm(p.Args(out.data()), nullptr);
    for (float v : out) ASSERT_FALSE(std::isnan(v));
  }
}

TEST_P(GemmPathTest, KZeroGivesEpilogueOfZero) {
  for (bool packed : {false, true}) {
    Problem p;
    p.m = 5;
    p.n = 40;
    p.k = 0;
    p.beta = 2.0f;
    p.bias = true;
    p.act = Activation::kRelu;
    p.packed = packed;
    p.Fill(8);
    p.Check(nullptr, "k=0");
  }
}

TEST_P(GemmPathTest, EmptyMOrNWritesNothing) {
  for (auto [m, n] : {std::pair<int64_t, int64_t>{0, 5}, {5, 0}}) {
    Problem p;
    p.m = m;
    p.n = n;
    p.k = 3;
    p.Fill(9);
    std::vector<float> out(16, 42.0f);
    Gemm(p.Args(out.data()), nullptr);
    for (float v : out) EXPECT_EQ(v, 42.0f);
  }
}

TEST_P(GemmPathTest, NaNAndInfPropagate) {
  for (DType type : {kF32, kBf16}) {
    for (int variant = 0; variant < 4; ++variant) {
      Problem p;
      p.ta = variant & 1;
      p.tb = variant & 2;
      p.m = 9;
      p.n = 40;
      p.k = 11;
      p.a_type = p.b_type = type;
      p.packed = variant == 3;
      p.Fill(11);
      // Row 2 of A holds a NaN; row 5 an infinity; column 3 of B an infinity and row 7 of A a
      // zero in the same k position, so (7, 3) is 0 * inf = NaN.
      p.A(2, 4) = kNaN;
      p.A(5, 0) = kInf;
      p.B(6, 3) = kInf;
      p.A(7, 6) = 0.0f;
      p.Sync();
      std::vector<float> out = p.Check(nullptr, "nan/inf");
      for (int64_t j = 0; j < p.n; ++j) EXPECT_TRUE(std::isnan(out[2 * p.ldc() + j])) << j;
      EXPECT_TRUE(std::isnan(out[7 * p.ldc() + 3]));
      for (int64_t i : {0, 1, 3, 8}) EXPECT_TRUE(std::isinf(out[i * p.ldc() + 3])) << i;
    }
  }
}

// Pairs of bf16 terms add their second (k+1) product first, as vdpbf16ps does. With
// a = [1, 0, -1, 2^-24] and b = ones, that order gives (1 + 2^-24) - 1 = 0 (the 2^-24 is lost
// to rounding before the -1 arrives); plain k order, the float32 product's, gives 2^-24.
TEST_P(GemmPathTest, Bf16PairsAddTheirSecondTermFirst) {
  const float a[] = {1.0f, 0.0f, -1.0f, 0x1p-24f};
  const float b[] = {1.0f, 1.0f, 1.0f, 1.0f};
  std::vector<bfloat16> a16(4), b16(4);
  FloatToBfloat16(a, a16);
  FloatToBfloat16(b, b16);
  for (DType type : {kF32, kBf16}) {
    GemmArgs g;
    g.m = g.n = 1;
    g.k = 4;
    g.a = type == kBf16 ? static_cast<const void*>(a16.data()) : a;
    g.b = type == kBf16 ? static_cast<const void*>(b16.data()) : b;
    g.a_type = g.b_type = type;
    g.lda = 4;
    g.ldb = 1;
    float c = -1;
    g.c = &c;
    g.ldc = 1;
    Gemm(g, nullptr);
    EXPECT_EQ(c, type == kBf16 ? 0.0f : 0x1p-24f) << DTypeName(type);
  }
}

// Threads change nothing: the same bits on a pool of four as on the calling thread.
TEST_P(GemmPathTest, ThreadedIsBitIdenticalToSerial) {
  ThreadPool pool(4);
  uint64_t seed = 21;
  for (DType type : {kF32, kBf16}) {
    for (bool tb : {false, true}) {
      Problem p;
      p.tb = tb;
      p.m = 130;
      p.n = 300;
      p.k = 520;
      p.a_type = p.b_type = type;
      p.packed = tb;
      p.bias = true;
      p.act = Activation::kGelu;
      p.Fill(seed++);
      std::vector<float> serial = p.c;
      Gemm(p.Args(serial.data()), nullptr);
      std::vector<float> threaded = p.Check(&pool, "threaded");
      EXPECT_TRUE(BitwiseEqual(serial, threaded)) << p.Describe();
    }
  }
}

// Each row of C is computed the same way whatever M is (batch invariance, which serving and
// training/serving parity rely on): a row of a 37-row product equals the 1-row product of that
// row, bit for bit.
TEST_P(GemmPathTest, RowsDoNotDependOnBatchSize) {
  for (DType type : {kF32, kBf16}) {
    Problem full;
    full.m = 37;
    full.n = 45;
    full.k = 300;
    full.a_type = full.b_type = type;
    full.packed = true;
    full.bias = true;
    full.act = Activation::kTanh;
    full.Fill(31);
    std::vector<float> all(full.m * full.ldc());
    Gemm(full.Args(all.data()), nullptr);
    const size_t elem = DTypeSize(type);
    for (int64_t i : {0, 5, 36}) {
      GemmArgs one = full.Args(nullptr);
      one.m = 1;
      one.a = static_cast<const char*>(full.AData()) + i * full.lda() * elem;
      std::vector<float> row(full.n);
      one.c = row.data();
      Gemm(one, nullptr);
      EXPECT_EQ(std::memcmp(row.data(), all.data() + i * full.ldc(), row.size() * sizeof(float)), 0)
          << DTypeName(type) << " row " << i;
    }
  }
}

// A product with an unpacked B of at most 16 columns and at least 64 rows is computed as its
// transpose (the weight gradient of a 10-class layer; see gemm.cc). It must pass the float64
// check with every layout, type mix and epilogue, and give each row the bits of that row's
// own 1-row product, which is computed the ordinary way.
TEST_P(GemmPathTest, NarrowProductsComputedTransposedMatchTheOrdinaryWay) {
  ThreadPool pool(2);
  uint64_t seed = 700;
  for (auto [at, bt] : kTypeMixes) {
    for (int variant = 0; variant < 4; ++variant) {
      Problem p;
      p.m = 100;
      p.n = variant % 2 == 0 ? 16 : 10;
      p.k = 37 + variant;
      p.ta = variant & 1;
      p.tb = variant & 2;
      p.a_type = at;
      p.b_type = bt;
      p.pad = 2;
      p.alpha = variant == 3 ? -0.5f : 1.0f;
      p.beta = variant == 3 ? 0.5f : 0.0f;
      p.bias = variant >= 2;
      p.residual = variant % 2 == 1;
      p.act = variant % 2 == 0 ? Activation::kRelu : Activation::kGelu;
      p.Fill(seed++);
      const std::vector<float> all = p.Check(variant % 2 == 1 ? &pool : nullptr, "narrow");
      if (HasFailure()) return;
      const size_t elem = DTypeSize(at);
      for (int64_t i : {0, 13, 99}) {
        GemmArgs one = p.Args(nullptr);
        one.m = 1;
        one.a = static_cast<const char*>(p.AData()) + i * (p.ta ? 1 : p.lda()) * elem;
        one.epilogue.residual = p.residual ? p.res.data() + i * p.ldr() : nullptr;
        std::vector<float> row(p.c.begin() + i * p.ldc(), p.c.begin() + (i + 1) * p.ldc());
        one.c = row.data();
        Gemm(one, nullptr);
        EXPECT_EQ(std::memcmp(row.data(), all.data() + i * p.ldc(), row.size() * sizeof(float)), 0)
            << p.Describe() << " row " << i;
      }
    }
  }
}

// Packing B ahead of time gives the bits packing it per call gives, for every storage
// layout; and Repack into the same PackedB reuses its storage.
TEST_P(GemmPathTest, PackedBMatchesUnpacked) {
  uint64_t seed = 900;
  for (auto [at, bt] : kTypeMixes) {
    for (bool tb : {false, true}) {
      Problem p;
      p.m = 19;
      p.n = 70;
      p.k = 45;
      p.tb = tb;
      p.a_type = at;
      p.b_type = bt;
      p.pad = 2;
      p.Fill(seed++);
      std::vector<float> unpacked = p.Check(nullptr, "unpacked");
      p.packed = true;
      p.Sync();
      std::vector<float> packed = p.Check(nullptr, "packed");
      EXPECT_TRUE(BitwiseEqual(unpacked, packed)) << p.Describe();
    }
  }
}

// bf16_compute on two float32 operands gives exactly the bf16 product of their roundings, and
// threaded, narrow (computed transposed) and wide shapes all agree with it.
TEST_P(GemmPathTest, Bf16ComputeRoundsFloatOperandsAsBf16Inputs) {
  ThreadPool pool(3);
  uint64_t seed = 1200;
  for (auto [m, n, k] : {std::array<int64_t, 3>{7, 9, 33}, {300, 10, 64}, {64, 200, 300}}) {
    for (bool ta : {false, true}) {
      Problem p;
      p.m = m;
      p.n = n;
      p.k = k;
      p.ta = ta;
      p.Fill(seed++);
      std::vector<float> forced = p.c;
      GemmArgs g = p.Args(forced.data());
      g.bf16_compute = true;
      Gemm(g, &pool);
      p.a_type = p.b_type = DType::kBFloat16;  // the same values, rounded and stored as bf16
      p.Sync();
      std::vector<float> rounded = p.Check(nullptr, "bf16 inputs");
      EXPECT_TRUE(BitwiseEqual(forced, rounded)) << p.Describe();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllPaths, GemmPathTest,
                         ::testing::Values(GemmPath::kPortable, GemmPath::kAvx2, GemmPath::kAvx512,
                                           GemmPath::kAvx512Bf16),
                         [](const ::testing::TestParamInfo<GemmPath>& info) {
                           return std::string(GemmPathName(info.param));
                         });

// Every path computes the same bits: float32 products by fused multiply-adds in k order,
// bf16 products pair by pair in vdpbf16ps's order (on normal numbers; vdpbf16ps flushes
// subnormals). So a model answers the same on every machine.
TEST(GemmPathsTest, AllPathsAgreeBitForBit) {
  const GemmPath saved = ActiveGemmPath();
  uint64_t seed = 77;
  for (auto [at, bt] : kTypeMixes) {
    Problem p;
    p.m = 29;
    p.n = 75;
    p.k = 301;
    p.ta = at == kBf16;
    p.a_type = at;
    p.b_type = bt;
    p.packed = bt == kBf16;
    p.bias = true;
    p.act = Activation::kRelu;
    p.Fill(seed++);
    std::vector<float> reference;
    for (GemmPath path : SupportedGemmPaths()) {
      ASSERT_TRUE(SetGemmPath(path).ok());
      std::vector<float> out = p.c;
      Gemm(p.Args(out.data()), nullptr);
      if (reference.empty()) {
        reference = out;
      } else {
        EXPECT_TRUE(BitwiseEqual(reference, out)) << GemmPathName(path) << " " << p.Describe();
      }
    }
  }
  ASSERT_TRUE(SetGemmPath(saved).ok());
}

// An A of K <= 512 words is read in place on the AVX-512 and AVX2 paths (KernelTable::direct_one)
// instead of packed, a float32 A for float32 products and a bf16 A of even K and even leading
// dimension for bf16 ones: the same multiply-adds in the same order, so the bits of the
// paths that pack it, at every strip height (M tails), every width (a half panel, a partial one,
// several), across leading dimensions wider than K (odd ones: packed), with the epilogue and
// beta, on any thread count.
TEST(GemmPathsTest, AnAReadInPlaceGivesThePackedBits) {
  const GemmPath saved = ActiveGemmPath();
  ThreadPool pool(3);
  uint64_t seed = 500;
  int cases = 0;
  for (DType type : {DType::kFloat32, DType::kBFloat16}) {
    const bool bf16 = type == DType::kBFloat16;
    for (int64_t m : {1, 11, 12, 13, 100}) {
      for (int64_t n : {1, 16, 24, 33, 64, 100}) {
        for (int64_t k : {int64_t{1}, int64_t{16}, int64_t{144}, bf16 ? int64_t{1024} : int64_t{512},
                          bf16 ? int64_t{1026} : int64_t{513}}) {
          Problem p;
          p.m = m;
          p.n = n;
          p.k = k;
          p.a_type = p.b_type = type;
          p.pad = (m + n) % 2 == 0 ? 0 : 3;
          p.packed = n % 2 == 0;
          p.bias = k != 16;
          p.residual = n >= 24;
          p.act = Activation::kRelu;
          if (m == 13) p.beta = 0.5f;
          p.Fill(seed++);
          std::vector<float> reference;
          for (GemmPath path : SupportedGemmPaths()) {
            ASSERT_TRUE(SetGemmPath(path).ok());
            for (ThreadPool* threads : {static_cast<ThreadPool*>(nullptr), &pool}) {
              std::vector<float> out = p.c;
              Gemm(p.Args(out.data()), threads);
              if (reference.empty()) {
                reference = out;
              } else {
                ASSERT_TRUE(BitwiseEqual(reference, out)) << GemmPathName(path) << " " << p.Describe();
              }
            }
          }
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 300);
  ASSERT_TRUE(SetGemmPath(saved).ok());
}

TEST(GemmPathsTest, NamesParseAndUnsupportedPathsAreRefused) {
  for (GemmPath path : {GemmPath::kPortable, GemmPath::kAvx2, GemmPath::kAvx512, GemmPath::kAvx512Bf16}) {
    auto parsed = ParseGemmPath(GemmPathName(path));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, path);
  }
  EXPECT_FALSE(ParseGemmPath("sse9").ok());
  ASSERT_FALSE(SupportedGemmPaths().empty());
  EXPECT_EQ(SupportedGemmPaths().front(), GemmPath::kPortable);
  for (GemmPath path : {GemmPath::kPortable, GemmPath::kAvx2, GemmPath::kAvx512, GemmPath::kAvx512Bf16}) {
    if (!GemmPathSupported(path)) {
      Status s = SetGemmPath(path);
      EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    }
  }
}

}  // namespace
}  // namespace lockstep
