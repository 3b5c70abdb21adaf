#include "training/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numbers>

namespace lockstep::training {
namespace {

Optimizer MakeOptimizer(const std::string& type, double weight_decay = 0, bool nesterov = false) {
  OptimizerConfig c;
  c.type = type;
  c.weight_decay = weight_decay;
  c.nesterov = nesterov;
  c.momentum = 0.5;
  StatusOr<Optimizer> o = Optimizer::Create(c);
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  return std::move(o).value();
}

// Runs `steps` updates of one weight vector with a fixed gradient; returns the weights.
std::vector<float> Steps(Optimizer& o, std::vector<float> w, const std::vector<float>& g, int steps,
                         double lr) {
  for (int s = 0; s < steps; ++s) {
    const Parameter p{std::span<float>(w), std::span<const float>(g), {}};
    o.Apply(std::span<const Parameter>(&p, 1), lr);
  }
  return w;
}

TEST(OptimizerTest, SgdWithAndWithoutL2Decay) {
  Optimizer sgd = MakeOptimizer("sgd");
  // Exactly w -= lr g in float, twice.
  const float lr = 0.1f;
  float w0 = 1.0f, w1 = -2.0f;
  for (int i = 0; i < 2; ++i) {
    w0 -= lr * (0.5f + 0.0f * w0);
    w1 -= lr * (0.25f + 0.0f * w1);
  }
  EXPECT_EQ(Steps(sgd, {1.0f, -2.0f}, {0.5f, 0.25f}, 2, 0.1), (std::vector<float>{w0, w1}));
  EXPECT_NEAR(w0, 0.9f, 1e-6);
  Optimizer decayed = MakeOptimizer("sgd", 0.1);
  const std::vector<float> w = Steps(decayed, {1.0f}, {0.0f}, 1, 0.5);
  EXPECT_FLOAT_EQ(w[0], 1.0f - 0.5f * 0.1f);
}

TEST(OptimizerTest, MomentumAndNesterovByHand) {
  // mu = 0.5, lr = 1, g = 1 each step: v = 1, 1.5, 1.75; w = -1, -2.5, -4.25.
  Optimizer m = MakeOptimizer("momentum");
  EXPECT_EQ(Steps(m, {0.0f}, {1.0f}, 3, 1.0), (std::vector<float>{-4.25f}));
  // Nesterov steps by g + mu v: 1 + 0.5, 1 + 0.75, 1 + 0.875 -> w = -1.5, -3.25, -5.125.
  Optimizer n = MakeOptimizer("momentum", 0, true);
  EXPECT_EQ(Steps(n, {0.0f}, {1.0f}, 3, 1.0), (std::vector<float>{-5.125f}));
  EXPECT_EQ(n.steps(), 3);
  ASSERT_EQ(n.state().size(), 1u);
  EXPECT_EQ(n.state()[0][0][0], 1.75f);
}

TEST(OptimizerTest, AdamMatchesTheFormulaInDouble) {
  Optimizer adam = MakeOptimizer("adam");
  std::vector<float> w = {0.5f, -1.0f, 2.0f};
  const std::vector<float> g = {0.1f, -3.0f, 1e-4f};
  double ref_w[3] = {0.5, -1.0, 2.0}, m[3] = {}, s[3] = {};
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-7;
  for (int t = 1; t <= 5; ++t) {
    w = Steps(adam, w, g, 1, lr);
    for (int i = 0; i < 3; ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[static_cast<size_t>(i)];
      s[i] = b2 * s[i] + (1 - b2) * double{g[static_cast<size_t>(i)]} * g[static_cast<size_t>(i)];
      ref_w[i] -= lr * (m[i] / (1 - std::pow(b1, t))) / (std::sqrt(s[i] / (1 - std::pow(b2, t))) + eps);
      EXPECT_NEAR(w[static_cast<size_t>(i)], ref_w[i], 1e-6) << "step " << t << " element " << i;
    }
  }
  // The first step moves each weight by about lr, whatever the gradient's scale.
  Optimizer fresh = MakeOptimizer("adam");
  const std::vector<float> once = Steps(fresh, {0.0f, 0.0f}, {1000.0f, 0.001f}, 1, 0.01);
  EXPECT_NEAR(once[0], -0.01f, 1e-6);
  EXPECT_NEAR(once[1], -0.01f, 1e-4);
}

TEST(OptimizerTest, AdamWDecaysTheWeightNotTheGradient) {
  // With a zero gradient adam does nothing; adamw still shrinks w by lr wd w.
  Optimizer adamw = MakeOptimizer("adamw", 0.5);
  EXPECT_FLOAT_EQ(Steps(adamw, {2.0f}, {0.0f}, 1, 0.1)[0], 2.0f - 0.1f * 0.5f * 2.0f);
  Optimizer adam_l2 = MakeOptimizer("adam", 0.5);
  // L2 puts wd w into the gradient, and adam normalises it: a step of about lr.
  EXPECT_NEAR(Steps(adam_l2, {2.0f}, {0.0f}, 1, 0.1)[0], 1.9f, 1e-5);
}

TEST(OptimizerTest, UnknownTypeIsAnError) {
  OptimizerConfig c;
  c.type = "rmsprop";
  EXPECT_FALSE(Optimizer::Create(c).ok());
}

TEST(ScheduleTest, ConstantStepCosineAndWarmup) {
  ScheduleConfig s;
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(s, 0.1, 500, 1000), 0.1);
  s.type = "step";
  s.step_size = 100;
  s.gamma = 0.5;
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(s, 0.1, 99, 1000), 0.1);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(s, 0.1, 100, 1000), 0.05);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(s, 0.1, 250, 1000), 0.025);
  s = ScheduleConfig{};
  s.type = "cosine";
  s.min_learning_rate = 0.01;
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(s, 0.1, 0, 101), 0.1);
  EXPECT_NEAR(ScheduledLearningRate(s, 0.1, 50, 101), 0.055, 1e-12);
  EXPECT_NEAR(ScheduledLearningRate(s, 0.1, 100, 101), 0.01, 1e-12);
  s.warmup_steps = 10;
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(s, 0.1, 0, 111), 0.1 * 1 / 10);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(s, 0.1, 4, 111), 0.1 * 5 / 10);
  EXPECT_DOUBLE_EQ(ScheduledLearningRate(s, 0.1, 10, 111), 0.1);
  EXPECT_NEAR(ScheduledLearningRate(s, 0.1, 110, 111), 0.01, 1e-12);
}

TEST(ClipTest, ScalesOnlyAboveTheNorm) {
  std::vector<float> a = {3.0f}, b = {4.0f};
  std::vector<std::span<float>> grads = {std::span<float>(a), std::span<float>(b)};
  EXPECT_DOUBLE_EQ(ClipByGlobalNorm(grads, 10.0), 5.0);
  EXPECT_EQ(a[0], 3.0f);
  EXPECT_DOUBLE_EQ(ClipByGlobalNorm(grads, 1.0), 5.0);
  EXPECT_FLOAT_EQ(a[0], 0.6f);
  EXPECT_FLOAT_EQ(b[0], 0.8f);
}

}  // namespace
}  // namespace lockstep::training

namespace lockstep::training {
namespace {

// Updates split across threads compute every element as one thread does: the same bits, for
// every optimiser, on parameters large enough to be split.
TEST(OptimizerTest, ParallelUpdatesAreTheSerialOnesBitForBit) {
  ThreadPool pool(3);
  std::vector<float> g(100000);
  for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(static_cast<float>(i)) * 0.01f;
  for (const char* type : {"sgd", "momentum", "adam", "adamw"}) {
    Optimizer serial = MakeOptimizer(type, 0.01, true), parallel = MakeOptimizer(type, 0.01, true);
    std::vector<float> a(g.size(), 0.5f), b = a;
    for (int s = 0; s < 3; ++s) {
      const Parameter pa{std::span<float>(a), std::span<const float>(g), {}};
      const Parameter pb{std::span<float>(b), std::span<const float>(g), {}};
      serial.Apply(std::span<const Parameter>(&pa, 1), 0.01);
      parallel.Apply(std::span<const Parameter>(&pb, 1), 0.01, &pool);
    }
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << type;
  }
}

// The update in pieces (StartStep, then UpdateRange over the elements in any order, as the
// mirrored step does while it reduces) is Apply's, bit for bit; and the bf16 copy a parameter
// asks for is its new values rounded, after every step.
TEST(OptimizerTest, UpdatesInRangesAreApplysAndKeepTheBf16Copy) {
  std::vector<float> g(50000);
  for (size_t i = 0; i < g.size(); ++i) g[i] = std::cos(static_cast<float>(i)) * 0.02f;
  for (const char* type : {"sgd", "momentum", "adam", "adamw"}) {
    Optimizer whole = MakeOptimizer(type, 0.01), pieces = MakeOptimizer(type, 0.01);
    std::vector<float> a(g.size(), 0.25f), b = a;
    std::vector<bfloat16> copy(g.size());
    const Parameter pa{std::span<float>(a), std::span<const float>(g), {}};
    const Parameter pb{std::span<float>(b), std::span<const float>(g), std::span<bfloat16>(copy)};
    for (int s = 0; s < 3; ++s) {
      whole.Apply(std::span<const Parameter>(&pa, 1), 0.01);
      pieces.StartStep(std::span<const Parameter>(&pb, 1), 0.01);
      // Back to front, in uneven pieces.
      for (size_t end = g.size(); end > 0;) {
        const size_t begin = end > 7777 ? end - 7777 : 0;
        pieces.UpdateRange(std::span<const Parameter>(&pb, 1), 0, begin, end);
        end = begin;
      }
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << type << " step " << s;
      for (size_t i = 0; i < b.size(); ++i)
        ASSERT_EQ(copy[i], FloatToBfloat16(b[i])) << type << " [" << i << "]";
    }
    EXPECT_EQ(whole.steps(), pieces.steps());
  }
}

}  // namespace
}  // namespace lockstep::training
