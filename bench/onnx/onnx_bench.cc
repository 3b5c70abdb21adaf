// Latency of Session::Run on an imported ONNX model, in process, on a pool of N threads (the
// caller counted). bench/onnx/ort_bench.js measures onnxruntime the same way and prints the same
// JSON line; bench/onnx/run_onnx_bench.sh runs both side by side.
//
//   bench_onnx --model m.onnx --input x --shape 32,784 --threads 1 --iterations 200
//              [--input-file in.f32] [--dump out.f32] [--bf16-products 1]
//   bench_onnx --peak-seconds 1 --threads 2
//   bench_onnx --case DIR --threads 1 --iterations 20
//
// --input-file: raw float32 input (else a fixed-seed normal one); --dump: the first output, raw
// float32, for a cross-check against onnxruntime; --bf16-products 1: the model's products on the
// bf16 matmul core (SessionOptions::bf16_products, the server's matmul_precision "bfloat16").
// --inputs SPEC.json: instead of --input/--shape/--input-file, every input from a JSON list of
// {"name", "dtype": "float32" | "int64", "shape": [...], "file": raw little-endian values}, as
// ort_bench.js --inputs reads it (a BERT's int64 token ids and mask).
// --case: a case laid out as ONNX's backend suite lays one out (DIR/model.onnx, and
// DIR/test_data_set_0/input_<i>.pb and output_0.pb), the real-model suite's layout: its inputs,
// and also how far the first output is from the reference (max_abs_diff, and max_rel: that over
// the reference's largest magnitude). Every run prints how long the import and compilation took
// (load_ms) and the first run (first_run_ms: for a model whose graph is made per input shape,
// the time to a first answer for a new shape, the graph made and compiled).
// --profile R: instead of the latency, R profiled runs (Session::RunProfiled) and a markdown
// table of each node's median time, product FLOPs and share of the FMA peak (measured for
// --peak-seconds-for-profile seconds, default 0.5, on the same threads), then the same by op.
// --peak-seconds: instead, the machine's float32 FMA peak on `threads` threads
// (bench/matmul/peak.h), `{"peak_gflops": ...}` or null where it cannot be measured, so that the
// script can say what fraction of it each runtime reaches.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"
#include <nlohmann/json.hpp>

#include "bench/onnx/step_profile.h"
#include "runtime/onnx/onnx_model.h"
#include "runtime/onnx/onnx_tensor.h"
#include "runtime/session.h"
#include "runtime/thread_pool.h"
#ifdef LOCKSTEP_BENCH_HAS_PEAK
#include "bench/matmul/peak.h"
#endif

using namespace lockstep;

namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "bench_onnx: %s\n", message.c_str());
  std::exit(1);
}

std::vector<int64_t> ParseShape(const std::string& text) {
  std::vector<int64_t> dims;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    dims.push_back(std::stoll(text.substr(pos, comma - pos)));
    pos = comma + 1;
  }
  return dims;
}

// A serialized onnx.TensorProto: its name and value.
NamedTensor ReadTensorProto(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  onnx::TensorProto proto;
  if (!proto.ParseFromIstream(&in)) Die(path + ": not a TensorProto");
  StatusOr<Tensor> t = TensorFromOnnx(proto, nullptr);
  if (!t.ok()) Die(path + ": " + t.status().ToString());
  return {proto.name(), *t};
}

// The inputs a --inputs file lists.
std::vector<NamedTensor> ReadInputSpec(const std::string& path) {
  std::ifstream in(path);
  if (!in) Die("cannot read " + path);
  nlohmann::json spec;
  try {
    spec = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    Die(path + ": " + e.what());
  }
  std::vector<NamedTensor> inputs;
  for (const nlohmann::json& entry : spec) {
    const std::string name = entry.value("name", ""), dtype = entry.value("dtype", ""), file = entry.value("file", "");
    StatusOr<Shape> shape = Shape::FromDims(entry.value("shape", std::vector<int64_t>{}));
    if (name.empty() || file.empty() || !shape.ok()) Die(path + ": every input needs a name, a shape and a file");
    Tensor t;
    if (dtype == "float32") t = Tensor(DType::kFloat32, *shape);
    else if (dtype == "int64") t = Tensor(DType::kInt64, *shape);
    else Die(path + ": input '" + name + "' has dtype '" + dtype + "' (float32 or int64)");
    std::ifstream data(file, std::ios::binary);
    data.read(static_cast<char*>(t.mutable_raw_data()), static_cast<std::streamsize>(t.byte_size()));
    if (data.gcount() != static_cast<std::streamsize>(t.byte_size())) Die("short input file " + file);
    inputs.push_back({name, std::move(t)});
  }
  return inputs;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, input_name = "x", shape_text, input_file, dump_file, case_dir, input_spec;
  int threads = 1, iterations = 100;
  bool bf16_products = false;
  double peak_seconds = 0;
  double profile_peak_seconds = 0.5;
  int profile_runs = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc) Die("missing value for " + arg);
    std::string value = argv[++i];
    if (arg == "--model") model_path = value;
    else if (arg == "--input") input_name = value;
    else if (arg == "--shape") shape_text = value;
    else if (arg == "--threads") threads = std::stoi(value);
    else if (arg == "--iterations") iterations = std::stoi(value);
    else if (arg == "--input-file") input_file = value;
    else if (arg == "--dump") dump_file = value;
    else if (arg == "--bf16-products") bf16_products = value == "1";
    else if (arg == "--peak-seconds") peak_seconds = std::stod(value);
    else if (arg == "--case") case_dir = value;
    else if (arg == "--inputs") input_spec = value;
    else if (arg == "--profile") profile_runs = std::stoi(value);
    else if (arg == "--peak-seconds-for-profile") profile_peak_seconds = std::stod(value);
    else Die("unknown argument " + arg);
  }
  if (peak_seconds > 0) {
    std::optional<double> peak;
#ifdef LOCKSTEP_BENCH_HAS_PEAK
    peak = bench::MeasurePeakGflops(bench::PeakKind::kFma, threads, peak_seconds);
#endif
    if (peak) std::printf("{\"peak_gflops\": %.1f}\n", *peak);
    else std::printf("{\"peak_gflops\": null}\n");
    return 0;
  }
  if (!case_dir.empty()) model_path = case_dir + "/model.onnx";
  if (model_path.empty() || (shape_text.empty() && case_dir.empty() && input_spec.empty())) {
    Die("--model and --shape (or --inputs, or --case) are required");
  }

  const auto load_start = std::chrono::steady_clock::now();
  StatusOr<Model> model = ReadOnnxModelFile(model_path);
  if (!model.ok()) Die("import failed: " + model.status().ToString());
  ThreadPool pool(threads);
  auto session = Session::Create(std::move(*model), SessionOptions{.pool = &pool, .bf16_products = bf16_products});
  if (!session.ok()) Die("session failed: " + session.status().ToString());
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();

  std::vector<NamedTensor> inputs;
  if (!input_spec.empty()) {
    inputs = ReadInputSpec(input_spec);
  } else if (!case_dir.empty()) {
    for (int i = 0;; ++i) {
      const std::string path = case_dir + "/test_data_set_0/input_" + std::to_string(i) + ".pb";
      if (!std::ifstream(path).good()) break;
      inputs.push_back(ReadTensorProto(path));
    }
  } else {
    std::vector<int64_t> dims = ParseShape(shape_text);
    StatusOr<Shape> shape = Shape::FromDims(dims);
    if (!shape.ok()) Die("bad --shape " + shape_text);
    Tensor input(DType::kFloat32, *shape);
    std::span<float> values = input.mutable_data<float>();
    if (!input_file.empty()) {
      std::ifstream in(input_file, std::ios::binary);
      in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(values.size_bytes()));
      if (in.gcount() != static_cast<std::streamsize>(values.size_bytes())) Die("short input file " + input_file);
    } else {
      std::mt19937 rng(42);
      std::normal_distribution<float> normal;
      for (float& v : values) v = normal(rng);
    }
    inputs.push_back({input_name, input});
  }
  std::vector<NamedTensor> outputs;
  auto run = [&] {
    Status status = (*session)->Run("serving_default", inputs, &outputs);
    if (!status.ok()) Die("run failed: " + status.ToString());
  };
  // The first run of a model whose graph is made per input makes and compiles it: the time to
  // a first answer for a new input shape. Any other model's first run touches its buffers.
  const auto first_start = std::chrono::steady_clock::now();
  run();
  const double first_run_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - first_start).count();
  const int warmup = std::max(3, iterations / 10);
  for (int i = 0; i < warmup; ++i) run();
  if (profile_runs > 0) {
    std::optional<double> peak;
#ifdef LOCKSTEP_BENCH_HAS_PEAK
    if (profile_peak_seconds > 0) peak = bench::MeasurePeakGflops(bench::PeakKind::kFma, threads, profile_peak_seconds);
#endif
    if (peak) std::printf("FMA peak on %d thread(s): %.1f GFLOP/s\n\n", threads, *peak);
    bench::PrintStepProfile(**session, inputs, profile_runs, peak);
    return 0;
  }
  std::vector<double> us;
  us.reserve(iterations);
  for (int i = 0; i < iterations; ++i) {
    auto start = std::chrono::steady_clock::now();
    run();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }

  if (!dump_file.empty()) {
    std::span<const float> out = outputs.front().tensor.data<float>();
    std::ofstream(dump_file, std::ios::binary)
        .write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size_bytes()));
  }
  std::string extra;
  if (!case_dir.empty()) {
    const NamedTensor want = ReadTensorProto(case_dir + "/test_data_set_0/output_0.pb");
    const Tensor* got = nullptr;
    for (const NamedTensor& o : outputs) {
      if (o.name == want.name) got = &o.tensor;
    }
    if (got == nullptr || !(got->shape() == want.tensor.shape()) || got->dtype() != DType::kFloat32) {
      Die("output '" + want.name + "' is missing or of another shape or type");
    }
    double largest = 0, worst = 0;
    for (size_t i = 0; i < static_cast<size_t>(got->num_elements()); ++i) {
      largest = std::max(largest, static_cast<double>(std::abs(want.tensor.data<float>()[i])));
      worst = std::max(worst, static_cast<double>(std::abs(got->data<float>()[i] - want.tensor.data<float>()[i])));
    }
    char buf[160];
    std::snprintf(buf, sizeof(buf), ", \"max_abs_diff\": %.3g, \"max_rel\": %.3g", worst,
                  largest > 0 ? worst / largest : worst);
    extra = buf;
  }
  std::printf("{\"median_us\": %.1f, \"p10_us\": %.1f, \"p90_us\": %.1f, \"runs\": %d, \"load_ms\": %.1f, "
              "\"first_run_ms\": %.1f%s}\n",
              Percentile(us, 0.5), Percentile(us, 0.1), Percentile(us, 0.9), iterations, load_ms, first_run_ms,
              extra.c_str());
  return 0;
}
