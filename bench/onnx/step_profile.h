// A model's time by node, for bench_onnx --profile: where the next bottleneck is.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "runtime/session.h"

namespace lockstep::bench {

// Floating-point operations of one step's products (2 per multiply-add): the convolutions and
// matrix products, from the shapes the step read and wrote; 0 for every other op. Counted as
// PyTorch's profiler counts them, so that a share of the peak means the same in both.
double StepProductFlops(const StepProfile& step);

// Runs `session` `runs` times through RunProfiled and prints, as markdown, every step's median
// time, its product FLOPs and (given the machine's peak) its share of the peak, slowest first,
// then the same summed by op, and the total against the median of the whole runs.
void PrintStepProfile(const Session& session, std::span<const NamedTensor> inputs, int runs,
                      std::optional<double> peak_gflops);

}  // namespace lockstep::bench
