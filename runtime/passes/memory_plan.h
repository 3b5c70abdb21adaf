// The memory plan: which intermediate values of a compiled graph may share one buffer.
// Two values share a buffer when their lifetimes (from the step that writes one to the last
// step that reads it) do not overlap. A step's outputs are placed before its inputs are
// released, so no kernel ever writes over what it is reading.
#pragma once

#include <vector>

namespace lockstep {

struct MemoryPlanStep {
  std::vector<int> inputs;   // value ids read
  std::vector<int> outputs;  // value ids written
  // Output 0 is input 0's storage under another shape (Reshape, Identity).
  bool aliases_input = false;
};

struct MemoryPlanProblem {
  int num_values = 0;
  std::vector<MemoryPlanStep> steps;  // in execution order
  // Values the executor supplies (inputs, constants): they never get a buffer.
  std::vector<bool> external;
  // Values that must survive to the end of the run (the signature's outputs).
  std::vector<int> live_to_end;
};

struct MemoryPlan {
  std::vector<int> buffer_of_value;  // -1: no arena buffer (external, or an alias)
  int num_buffers = 0;
};

// With `reuse` false every value gets its own buffer (the reference the tests compare with).
MemoryPlan PlanMemory(const MemoryPlanProblem& problem, bool reuse = true);

}  // namespace lockstep
