#include "runtime/passes/memory_plan.h"

#include <gtest/gtest.h>

#include <random>

namespace lockstep {
namespace {

MemoryPlanProblem Chain(int length) {
  // v0 is external; step i reads v_i and writes v_{i+1}.
  MemoryPlanProblem p;
  p.num_values = length + 1;
  p.external.assign(p.num_values, false);
  p.external[0] = true;
  for (int i = 0; i < length; ++i) p.steps.push_back({{i}, {i + 1}, false});
  p.live_to_end = {length};
  return p;
}

TEST(MemoryPlan, ChainNeedsTwoBuffers) {
  MemoryPlan plan = PlanMemory(Chain(10));
  EXPECT_EQ(plan.num_buffers, 2);
  EXPECT_EQ(plan.buffer_of_value[0], -1);
  for (int v = 1; v < 10; ++v) EXPECT_NE(plan.buffer_of_value[v], plan.buffer_of_value[v + 1]);
}

TEST(MemoryPlan, WithoutReuseEveryValueHasItsOwn) {
  MemoryPlan plan = PlanMemory(Chain(10), /*reuse=*/false);
  EXPECT_EQ(plan.num_buffers, 10);
}

TEST(MemoryPlan, AliasExtendsTheLifetimeOfItsStorage) {
  // s0: v0 -> v1; s1: v1 -> v2 (alias of v1); s2: v0 -> v3; s3: v2, v3 -> v4.
  MemoryPlanProblem p;
  p.num_values = 5;
  p.external = {true, false, false, false, false};
  p.steps = {{{0}, {1}, false}, {{1}, {2}, true}, {{0}, {3}, false}, {{2, 3}, {4}, false}};
  p.live_to_end = {4};
  MemoryPlan plan = PlanMemory(p);
  EXPECT_EQ(plan.buffer_of_value[2], -1);  // the alias has no storage of its own
  // v1's storage is still read (through v2) at step 3, so v3 must not take it.
  EXPECT_NE(plan.buffer_of_value[1], plan.buffer_of_value[3]);
  EXPECT_NE(plan.buffer_of_value[4], plan.buffer_of_value[1]);
  EXPECT_NE(plan.buffer_of_value[4], plan.buffer_of_value[3]);
}

// On random DAGs: no two values whose lifetimes overlap share a buffer.
TEST(MemoryPlan, RandomProblemsNeverShareLiveBuffers) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    MemoryPlanProblem p;
    int num_external = 1 + rng() % 3;
    p.num_values = num_external;
    p.external.assign(num_external, true);
    int steps = 1 + rng() % 25;
    for (int s = 0; s < steps; ++s) {
      MemoryPlanStep step;
      int num_in = 1 + rng() % 3;
      for (int k = 0; k < num_in; ++k) step.inputs.push_back(rng() % p.num_values);
      int num_out = 1 + rng() % 2;
      for (int k = 0; k < num_out; ++k) {
        step.outputs.push_back(p.num_values++);
        p.external.push_back(false);
      }
      step.aliases_input = rng() % 4 == 0;
      p.steps.push_back(step);
    }
    p.live_to_end = {p.num_values - 1};
    MemoryPlan plan = PlanMemory(p);

    // Recompute storage roots and lifetimes independently.
    std::vector<int> root(p.num_values), def(p.num_values, -1), last(p.num_values, -1);
    for (int v = 0; v < p.num_values; ++v) root[v] = v;
    for (int s = 0; s < steps; ++s) {
      const auto& st = p.steps[s];
      if (st.aliases_input) root[st.outputs[0]] = root[st.inputs[0]];
      for (int v : st.outputs) def[v] = s;
    }
    for (int s = 0; s < steps; ++s) {
      for (int v : p.steps[s].inputs) last[root[v]] = std::max(last[root[v]], s);
      for (int v : p.steps[s].outputs) last[root[v]] = std::max(last[root[v]], s);
    }
    for (int v : p.live_to_end) last[root[v]] = steps;
    for (int a = 0; a < p.num_values; ++a) {
      for (int b = a + 1; b < p.num_values; ++b) {
        int ba = plan.buffer_of_value[a], bb = plan.buffer_of_value[b];
        if (ba < 0 || ba != bb) continue;
        bool overlap = def[a] <= last[b] && def[b] <= last[a];
        ASSERT_FALSE(overlap) << "trial " << trial << " values " << a << " and " << b;
      }
    }
  }
}

}  // namespace
}  // namespace lockstep
