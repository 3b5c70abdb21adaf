// Timing and checking one prepared product, the same way for every library.
#pragma once

#include <cstdint>

#include "bench/matmul/peers.h"

namespace lockstep::bench {

struct MeasureOptions {
  // Warm-up before timing: at least two calls and this long. It also covers the previous
  // library's threads: OpenBLAS's spin for up to ~0.1 s after their last job, and a spinning
  // thread on a 2-core machine would halve whatever runs next.
  double warmup_s = 0.15;
  // Timed calls: `batches` batches of at least min_time_s / batches seconds (at least one call).
  double min_time_s = 0.2;
  int batches = 5;
};

struct Timing {
  double best_s = 0;        // the fastest batch's seconds per call: the reported figure, because
                            // other load on a shared machine only ever slows a batch down
  double median_s = 0;      // the median batch's, to show how noisy the run was
  double cpu_per_wall = 0;  // process CPU time over wall time while timing: the threads in use
  int64_t calls = 0;
};

Timing Measure(PreparedMatmul& matmul, const MeasureOptions& options);

// Compares sampled elements of problem.c with a double-precision product of the same inputs.
// Returns the largest error, relative to the sum of |a||b| over k of the element (float32
// accumulation over K terms stays far below 1e-3 of it; a transposed or missing operand is
// of order 1).
double SampledRelativeError(const MatmulProblem& problem);

// How much of the machine other processes used since construction (0 to 1 of all CPUs), from
// /proc/stat less this process's own CPU time. A 2-core machine shared with a compiler gives
// figures that mean nothing; this says so instead of leaving it to be guessed.
class OtherLoadMeter {
 public:
  OtherLoadMeter();
  double Fraction() const;  // negative when /proc/stat cannot be read

 private:
  double busy_s_, own_s_, wall_s_;
};

}  // namespace lockstep::bench
