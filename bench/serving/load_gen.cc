// serving_load_gen: a closed-loop load generator for TensorFlow Serving's predict API, or the
// Open Inference Protocol's (KServe v2) infer, over REST or gRPC. For each concurrency level
// it keeps that many requests outstanding for a fixed time after a warm-up, checks every
// answer, and prints one Markdown table row: requests/s, latency percentiles and errors. One
// thread and asynchronous I/O, so that on a small machine the client takes as little CPU as
// possible from the server it measures.
//
//   serving_load_gen --protocol=rest --target=127.0.0.1:8501 --concurrency=1,16,64
//   serving_load_gen --protocol=grpc --api=v2 --target=127.0.0.1:8500
//
// Exit status: 0 when every level ran (errors are in the table), 1 when the target cannot be
// reached, 2 for bad usage.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "bench/serving/flags.h"
#include "bench/serving/load_gen.h"

namespace lockstep::bench {
namespace {

constexpr const char* kUsage = R"(usage: serving_load_gen [--name=value ...]
  --protocol=rest|grpc            (default rest)
  --api=tfs|v2|v2_binary          tfs: TF Serving's predict (default); v2: the Open Inference
                                  Protocol's infer, REST with JSON "data", gRPC ModelInfer with
                                  raw_input_contents; v2_binary (REST only): infer with the
                                  input and output as raw bytes after a JSON header
  --target=HOST:PORT              (default 127.0.0.1:8501)
  --model=NAME                    (default half_plus_two)
  --concurrency=1,16,64           requests kept outstanding, one level each
  --duration_s=5 --warmup_s=1     seconds measured per level, after the unmeasured warm-up
  --body=JSON                     TF API REST request body (default {"instances": [1.0, 2.0, 5.0]})
  --input=x                       the gRPC and v2 input's name
  --grpc_x=1,2,5                  its values (gRPC float_val; v2 FP32 "data" or raw bytes)
  --grpc_x_file=PATH              instead, raw float32 values from a file (an image's 150528)
  --grpc_shape=N,...              its shape (default [n], n the number of values)
  --expect=2.5,3.0,4.5            the values a correct answer holds (--expect_file: raw float32):
  --rest_output=predictions         TF API REST: the value of this key of the body, read flat
  --output=y                        gRPC and v2: the output of this name (float or int64)
  --grpc_channels=1               gRPC connections the calls are spread over
  --rate=0                        requests/s per level, evenly spaced (0: as fast as answered)
  --label=NAME                    first column of each row (default the target)
  --header=1                      0 leaves out the table header
)";

template <typename T>
std::optional<std::vector<T>> ParseList(std::string_view text) {
  std::vector<T> values;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::optional<T> value = Flags::ParseNumber<T>(text.substr(0, comma));
    if (!value) return std::nullopt;
    values.push_back(*value);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  if (values.empty()) return std::nullopt;
  return values;
}

// Raw little-endian float32 values of a file; nullopt (and a message) when it cannot be read.
std::optional<std::vector<float>> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.eof() && in.fail()) bytes.clear();
  if (bytes.empty() || bytes.size() % sizeof(float) != 0) {
    std::fprintf(stderr, "%s: not a file of float32 values\n", path.c_str());
    return std::nullopt;
  }
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

struct Options {
  std::string protocol;
  std::string protocol_column;  // the protocol, and the API unless it is the TF API
  std::string label;
  bool header = true;
  std::vector<int> levels;
  LevelSpec spec;
};

std::optional<Options> ParseOptions(int argc, char** argv) {
  std::optional<Flags> flags =
      Flags::Parse(argc, argv, {"protocol", "target", "model", "concurrency", "duration_s",
                                "warmup_s", "body", "grpc_x", "expect", "grpc_channels", "label",
                                "header", "input", "grpc_shape", "rest_output", "output", "rate", "api",
                                "grpc_x_file", "expect_file"});
  if (!flags) return std::nullopt;
  Options options;
  options.protocol = flags->Get("protocol", "rest");
  if (options.protocol != "rest" && options.protocol != "grpc") {
    std::fprintf(stderr, "--protocol must be rest or grpc\n");
    return std::nullopt;
  }
  const std::string api = flags->Get("api", "tfs");
  if (api == "tfs") {
    options.spec.api = Api::kTfs;
  } else if (api == "v2") {
    options.spec.api = Api::kV2;
  } else if (api == "v2_binary" && options.protocol == "rest") {
    options.spec.api = Api::kV2Binary;
  } else {
    std::fprintf(stderr, "--api must be tfs or v2, or over REST v2_binary (gRPC's ModelInfer is binary already)\n");
    return std::nullopt;
  }
  // The table's protocol column: the TF API's rows read as they always have.
  options.protocol_column = api == "tfs" ? options.protocol : options.protocol + " " + api;
  std::string target = flags->Get("target", "127.0.0.1:8501");
  size_t colon = target.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == target.size()) {
    std::fprintf(stderr, "--target must be HOST:PORT\n");
    return std::nullopt;
  }
  LevelSpec& spec = options.spec;
  spec.host = target.substr(0, colon);
  spec.port = target.substr(colon + 1);
  spec.model = flags->Get("model", "half_plus_two");
  spec.rest_body = flags->Get("body", R"({"instances": [1.0, 2.0, 5.0]})");
  options.label = flags->Get("label", target);
  options.header = flags->Get("header", "1") != "0";

  auto levels = ParseList<int>(flags->Get("concurrency", "1,16,64"));
  const std::string x_file = flags->Get("grpc_x_file", ""), expect_file = flags->Get("expect_file", "");
  auto grpc_x = x_file.empty() ? ParseList<float>(flags->Get("grpc_x", "1,2,5")) : ReadFloats(x_file);
  auto expect = expect_file.empty() ? ParseList<float>(flags->Get("expect", "2.5,3.0,4.5")) : ReadFloats(expect_file);
  std::optional<std::vector<int64_t>> grpc_shape = std::vector<int64_t>{};
  if (const std::string shape = flags->Get("grpc_shape", ""); !shape.empty()) grpc_shape = ParseList<int64_t>(shape);
  auto duration = flags->Number<double>("duration_s", 5);
  auto warmup = flags->Number<double>("warmup_s", 1);
  auto channels = flags->Number<int>("grpc_channels", 1);
  auto rate = flags->Number<double>("rate", 0);
  if (!levels || !grpc_x || !expect || !grpc_shape) {
    std::fprintf(stderr, "--concurrency, --grpc_x, --grpc_shape and --expect take comma-separated numbers\n");
    return std::nullopt;
  }
  if (!duration || !warmup || !channels || !rate) return std::nullopt;
  if (*duration <= 0 || *warmup < 0 || *channels < 1 || *rate < 0 ||
      std::ranges::any_of(*levels, [](int level) { return level < 1; })) {
    std::fprintf(stderr, "durations, channels and levels must be positive\n");
    return std::nullopt;
  }
  options.levels = *levels;
  spec.grpc_x = *grpc_x;
  spec.grpc_shape = *grpc_shape;
  spec.input = flags->Get("input", "x");
  spec.rest_output = flags->Get("rest_output", "predictions");
  spec.output = flags->Get("output", "y");
  spec.expect = *expect;
  spec.grpc_channels = *channels;
  spec.rate = *rate;
  spec.duration = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*duration));
  spec.warmup = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*warmup));
  return options;
}

// The nearest-rank percentile. nth_element reorders `values` but needs no full sort.
uint32_t Percentile(std::vector<uint32_t>& values, double fraction) {
  if (values.empty()) return 0;
  double ceil_rank = std::ceil(fraction * static_cast<double>(values.size()));
  size_t rank = std::min(static_cast<size_t>(std::max(ceil_rank, 1.0)) - 1, values.size() - 1);
  std::nth_element(values.begin(), values.begin() + static_cast<ptrdiff_t>(rank), values.end());
  return values[rank];
}

void PrintRow(const Options& options, int concurrency, Tally& tally) {
  std::vector<uint32_t>& latencies = tally.latencies_us();
  double rate = static_cast<double>(latencies.size()) / tally.seconds();
  uint32_t p50 = Percentile(latencies, 0.50);
  uint32_t p90 = Percentile(latencies, 0.90);
  uint32_t p99 = Percentile(latencies, 0.99);
  std::printf("| %s | %s | %d | %.0f | %u | %u | %u | %llu |\n", options.label.c_str(),
              options.protocol_column.c_str(), concurrency, rate, p50, p90, p99,
              static_cast<unsigned long long>(tally.errors()));
  std::fflush(stdout);
  if (tally.errors() > 0) {
    std::fprintf(stderr, "serving_load_gen: %s %s concurrency %d: %llu errors, the first: %s\n",
                 options.label.c_str(), options.protocol_column.c_str(), concurrency,
                 static_cast<unsigned long long>(tally.errors()), tally.first_error().c_str());
  }
}

int Main(int argc, char** argv) {
  std::optional<Options> options = ParseOptions(argc, argv);
  if (!options) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const bool rest = options->protocol == "rest";
  std::string error;
  if (!(rest ? ProbeRest(options->spec, &error) : ProbeGrpc(options->spec, &error))) {
    std::fprintf(stderr, "serving_load_gen: %s\n", error.c_str());
    return 1;
  }
  if (options->header) {
    std::printf("| label | protocol | concurrency | requests/s | p50 µs | p90 µs | p99 µs | errors |\n");
    std::printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
  }
  for (int concurrency : options->levels) {
    LevelSpec spec = options->spec;
    spec.concurrency = concurrency;
    Tally tally(Clock::now(), spec);
    bool ran = rest ? RunRestLevel(spec, &tally, &error) : RunGrpcLevel(spec, &tally, &error);
    if (!ran) {
      std::fprintf(stderr, "serving_load_gen: %s\n", error.c_str());
      return 1;
    }
    PrintRow(*options, concurrency, tally);
  }
  return 0;
}

}  // namespace
}  // namespace lockstep::bench

int main(int argc, char** argv) { return lockstep::bench::Main(argc, argv); }
