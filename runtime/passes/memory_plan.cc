#include "runtime/passes/memory_plan.h"

#include <limits>

namespace lockstep {

MemoryPlan PlanMemory(const MemoryPlanProblem& problem, bool reuse) {
  const int n = problem.num_values;
  const int num_steps = static_cast<int>(problem.steps.size());
  constexpr int kForever = std::numeric_limits<int>::max();

  // An aliasing output lives in the storage of its input's root.
  std::vector<int> root(n);
  for (int v = 0; v < n; ++v) root[v] = v;
  for (const MemoryPlanStep& step : problem.steps) {
    if (step.aliases_input && !step.inputs.empty() && !step.outputs.empty()) {
      root[step.outputs[0]] = root[step.inputs[0]];
    }
  }

  // Last step touching each root's storage, through any alias.
  std::vector<int> last_use(n, -1);
  for (int i = 0; i < num_steps; ++i) {
    for (int v : problem.steps[i].inputs) last_use[root[v]] = std::max(last_use[root[v]], i);
    for (int v : problem.steps[i].outputs) last_use[root[v]] = std::max(last_use[root[v]], i);
  }
  for (int v : problem.live_to_end) last_use[root[v]] = kForever;

  std::vector<std::vector<int>> released_after(num_steps);
  for (int v = 0; v < n; ++v) {
    if (root[v] == v && last_use[v] >= 0 && last_use[v] != kForever) released_after[last_use[v]].push_back(v);
  }

  MemoryPlan plan;
  plan.buffer_of_value.assign(n, -1);
  std::vector<int> free_buffers;
  for (int i = 0; i < num_steps; ++i) {
    const MemoryPlanStep& step = problem.steps[i];
    for (int v : step.outputs) {
      if (root[v] != v || problem.external[v]) continue;
      if (reuse && !free_buffers.empty()) {
        plan.buffer_of_value[v] = free_buffers.back();
        free_buffers.pop_back();
      } else {
        plan.buffer_of_value[v] = plan.num_buffers++;
      }
    }
    if (!reuse) continue;
    for (int v : released_after[i]) {
      if (plan.buffer_of_value[v] >= 0) free_buffers.push_back(plan.buffer_of_value[v]);
    }
  }
  // Aliasing values keep -1: their kernel shares its input's storage, and must it allocate
  // after all, it gets fresh memory rather than the buffer it may be reading.
  return plan;
}

}  // namespace lockstep
