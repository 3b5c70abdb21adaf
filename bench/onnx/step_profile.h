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
// time, its product FLOPs and (given the machine's peak) its share of the peak, the bytes it
// reads and writes per second and, for a depthwise convolution (memory-bound), that rate
// against a memcpy of the same working set measured here; slowest first, then the same summed
// by op, and the depthwise convolutions' share of the copy rate over all of them.
void PrintStepProfile(const Session& session, std::span<const NamedTensor> inputs, int runs,
                      std::optional<double> peak_gflops);

}  // namespace lockstep::bench
