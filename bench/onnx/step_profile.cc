#include "bench/onnx/step_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace lockstep::bench {
namespace {

double Elements(const Shape& s) { return s.num_elements() < 0 ? 0.0 : static_cast<double>(s.num_elements()); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::string ShapeList(const std::vector<Shape>& shapes) {
  std::string text;
  for (const Shape& s : shapes) text += (text.empty() ? "" : " ") + s.ToString();
  return text;
}

// Bytes a step reads and writes, its inputs and outputs counted once each as float32 (what the
// memory-bound ops of an image model move).
double StepBytes(const StepProfile& step) {
  double elements = 0;
  for (const Shape& s : step.input_shapes) elements += Elements(s);
  for (const Shape& s : step.output_shapes) elements += Elements(s);
  return 4 * elements;
}

// A STREAM-style copy on this thread: the best bytes per second (read and written) of
// memcpy over a working set of `bytes` (half source, half destination), first touched before.
double CopyBytesPerSecond(size_t bytes) {
  std::vector<char> buffer(std::max<size_t>(bytes, 2 * 64), 1);
  const size_t half = buffer.size() / 2;
  double best = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
  for (int r = 0; r < 3 || std::chrono::steady_clock::now() < until; ++r) {
    const auto start = std::chrono::steady_clock::now();
    std::memcpy(buffer.data() + half, buffer.data(), half);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s > 0) best = std::max(best, 2.0 * static_cast<double>(half) / s);
  }
  return best;
}

bool IsDepthwise(const StepProfile& step) { return step.op.find("DepthwiseConv2D") != std::string::npos; }

}  // namespace

double StepProductFlops(const StepProfile& step) {
  if (step.output_shapes.empty() || step.input_shapes.size() < 2) return 0;
  const Shape& out = step.output_shapes[0];
  const Shape& b = step.input_shapes[1];
  if ((step.op == "Conv2D" || step.op == "FusedConv2D") && b.rank() == 4) {
    // Filter [KH, KW, Cin, Cout]: each output element is a dot product of KH * KW * Cin terms.
    return 2.0 * Elements(out) * static_cast<double>(b.dim(0) * b.dim(1) * b.dim(2));
  }
  if (IsDepthwise(step) && b.rank() == 4) {
    return 2.0 * Elements(out) * static_cast<double>(b.dim(0) * b.dim(1));
  }
  if (step.op == "MatMul" || step.op == "FusedMatMul" || step.op == "BatchMatMul") {
    // out [..., M, N]; the inner dimension is the one a's last two dimensions share with b's
    // beyond out's: a [.., M, K] or [.., K, M], so K = a's elements per output row block.
    const Shape& a = step.input_shapes[0];
    if (a.rank() < 2 || out.rank() < 2) return 0;
    const double m = static_cast<double>(out.dim(out.rank() - 2));
    const double a_last2 = static_cast<double>(a.dim(a.rank() - 1) * a.dim(a.rank() - 2));
    const double k = m > 0 ? a_last2 / m : 0;
    return 2.0 * Elements(out) * k;
  }
  return 0;
}

void PrintStepProfile(const Session& session, std::span<const NamedTensor> inputs, int runs,
                      std::optional<double> peak_gflops) {
  std::vector<NamedTensor> outputs;
  std::vector<StepProfile> profile;
  std::vector<StepProfile> first;
  std::vector<std::vector<double>> seconds;
  for (int r = 0; r < runs; ++r) {
    Status status = session.RunProfiled("serving_default", inputs, &outputs, &profile);
    if (!status.ok()) {
      std::fprintf(stderr, "bench_onnx: profiled run failed: %s\n", status.ToString().c_str());
      std::exit(1);
    }
    if (r == 0) {
      first = profile;
      seconds.resize(profile.size());
    }
    for (size_t i = 0; i < profile.size() && i < seconds.size(); ++i) seconds[i].push_back(profile[i].seconds);
  }

  struct Row {
    size_t index;
    double us;
    double flops;
  };
  std::vector<Row> rows;
  double total_us = 0, total_flops = 0;
  for (size_t i = 0; i < first.size(); ++i) {
    rows.push_back({i, Median(seconds[i]) * 1e6, StepProductFlops(first[i])});
    total_us += rows.back().us;
    total_flops += rows.back().flops;
  }
  auto share = [&](double flops, double us) {
    if (!peak_gflops || us <= 0 || flops <= 0) return std::string("");
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.0f %%", 100.0 * flops / (us * 1e3) / *peak_gflops);
    return std::string(buf);
  };

  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.us > b.us; });
  // A depthwise convolution is memory-bound: its bytes per second against a copy of the same
  // working set, measured here (one thread), as the yardstick.
  std::map<size_t, double> copy_rate;
  std::printf("| node | op | µs | %% of time | MFLOP | %% of peak | GB/s | %% of a copy | inputs -> outputs |\n"
              "|---|---|---:|---:|---:|---:|---:|---:|---|\n");
  double depthwise_bytes = 0, depthwise_copy_seconds = 0;
  for (const Row& row : rows) {
    const StepProfile& s = first[row.index];
    const double bytes = StepBytes(s);
    std::string of_copy;
    if (IsDepthwise(s) && row.us > 0) {
      const size_t size = static_cast<size_t>(bytes);
      if (!copy_rate.contains(size)) copy_rate[size] = CopyBytesPerSecond(size);
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.0f %%", 100.0 * bytes / (row.us * 1e-6) / copy_rate[size]);
      of_copy = buf;
      depthwise_bytes += bytes;
      depthwise_copy_seconds += bytes / copy_rate[size];
    }
    std::printf("| %s | %s | %.1f | %.1f %% | %.1f | %s | %.1f | %s | %s -> %s |\n", s.node.c_str(), s.op.c_str(),
                row.us, 100.0 * row.us / total_us, row.flops / 1e6, share(row.flops, row.us).c_str(),
                row.us > 0 ? bytes / (row.us * 1e3) : 0.0, of_copy.c_str(), ShapeList(s.input_shapes).c_str(),
                ShapeList(s.output_shapes).c_str());
  }

  struct OpTotal {
    double us = 0, flops = 0;
    int count = 0;
  };
  std::map<std::string, OpTotal> by_op;
  for (const Row& row : rows) {
    OpTotal& t = by_op[first[row.index].op];
    t.us += row.us;
    t.flops += row.flops;
    ++t.count;
  }
  std::vector<std::pair<std::string, OpTotal>> ops(by_op.begin(), by_op.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
  std::printf("\n| op | nodes | µs | %% of time | MFLOP | %% of peak |\n|---|---:|---:|---:|---:|---:|\n");
  for (const auto& [op, t] : ops) {
    std::printf("| %s | %d | %.1f | %.1f %% | %.1f | %s |\n", op.c_str(), t.count, t.us, 100.0 * t.us / total_us,
                t.flops / 1e6, share(t.flops, t.us).c_str());
  }
  std::printf("| all | %zu | %.1f | 100 %% | %.1f | %s |\n", rows.size(), total_us, total_flops / 1e6,
              share(total_flops, total_us).c_str());
  if (depthwise_bytes > 0) {
    double depthwise_us = 0;
    for (const Row& row : rows) depthwise_us += IsDepthwise(first[row.index]) ? row.us : 0;
    std::printf("\nDepthwise convolutions: %.1f MB in %.0f µs, %.0f %% of the rate a copy of each one's working set "
                "reaches on one thread.\n",
                depthwise_bytes / 1e6, depthwise_us, 100.0 * depthwise_copy_seconds / (depthwise_us * 1e-6));
  }
}

}  // namespace lockstep::bench
