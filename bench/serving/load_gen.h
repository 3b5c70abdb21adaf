// What the load generator's REST and gRPC drivers share: one concurrency level's settings and
// the tally of its requests.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::bench {

using Clock = std::chrono::steady_clock;

// Which API the requests speak. The drivers' loops are the same for all: only how a request is
// encoded and how an answer is checked differ.
enum class Api {
  kTfs,       // TensorFlow Serving's predict: REST /v1/models/<model>:predict, gRPC Predict
  kV2,        // the Open Inference Protocol's infer: REST /v2/models/<model>/infer with JSON
              // "data", gRPC ModelInfer with raw_input_contents (as Triton's clients send it)
  kV2Binary,  // REST only: that infer with the input and output as raw bytes after a JSON header
};

// Requests still outstanding this long after a level's end are abandoned, so that a hung server
// ends the run instead of stalling it; they count as errors.
inline constexpr std::chrono::seconds kGrace{10};

struct LevelSpec {
  std::string host;
  std::string port;
  std::string model;
  int concurrency = 1;
  Clock::duration warmup{};
  Clock::duration duration{};
  Api api = Api::kTfs;
  std::string rest_body;       // POSTed to /v1/models/<model>:predict (TF API only)
  std::string input = "x";          // the gRPC and v2 input's name
  std::vector<float> grpc_x;        // its values (gRPC float_val; v2 FP32, JSON or raw)
  std::vector<int64_t> grpc_shape;  // its shape; empty: [grpc_x.size()]
  // The values a correct answer holds: TF API over REST, the value of the body's key
  // `rest_output` (nested arrays read flat); gRPC and v2, the output named `output` (float or
  // int64, read as float).
  std::string rest_output = "predictions";
  std::string output = "y";
  std::vector<float> expect;
  int grpc_channels = 1;
  // Requests per second over the whole level; 0: each as soon as the last one's answer came
  // (a closed loop, the default: how a peak is measured).
  double rate = 0;
};

// Paces a level at a fixed rate: each request takes the next slot of an evenly spaced
// schedule and waits for it when early, so that a soak can hold a chosen share of the peak,
// which concurrency alone cannot. A schedule that fell more than a second behind (the server
// stalled) restarts from now rather than send the backlog in one burst. One thread's.
class Pacer {
 public:
  Pacer(double rate, Clock::time_point start)
      : interval_(rate > 0 ? std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / rate))
                           : Clock::duration::zero()),
        next_(start) {}

  bool paced() const { return interval_ > Clock::duration::zero(); }
  // When the next request may go: at once if this is not in the future.
  Clock::time_point Next(Clock::time_point now) {
    if (!paced()) return now;
    if (next_ < now - std::chrono::seconds(1)) next_ = now;
    const Clock::time_point slot = next_;
    next_ += interval_;
    return slot;
  }

 private:
  Clock::duration interval_;
  Clock::time_point next_;
};

// Counts what completes inside the measured window, which follows the warm-up: connection
// set-up and cold caches are not what is being measured.
class Tally {
 public:
  Tally(Clock::time_point start, const LevelSpec& spec)
      : measure_start_(start + spec.warmup), end_(measure_start_ + spec.duration) {
    // Sized for a fast server so that recording never reallocates mid-run in the usual case.
    latencies_us_.reserve(1 << 20);
  }

  // Records a request sent at `sent` and completed (well or not) at `done`. Returns whether the
  // level is still running, i.e. whether the caller should send another.
  bool Record(Clock::time_point sent, Clock::time_point done, bool ok) {
    if (done >= end_) {
      // Calls in flight at the end are normal in a closed loop and are not counted, but a
      // failure reported this long after the end can only be a call that hung until abandoned.
      if (!ok && done >= end_ + kGrace / 2) ++errors_;
      return false;
    }
    if (done < measure_start_) return true;
    if (ok) {
      auto us = std::chrono::duration_cast<std::chrono::microseconds>(done - sent).count();
      latencies_us_.push_back(static_cast<uint32_t>(us));
    } else {
      ++errors_;
    }
    return true;
  }

  // Keeps the first error's description (`describe()` is called only then), for stderr: a
  // count alone does not say what went wrong.
  template <typename Describe>
  void NoteError(Describe describe) {
    if (first_error_.empty()) first_error_ = describe();
  }
  const std::string& first_error() const { return first_error_; }

  bool Over(Clock::time_point now) const { return now >= end_; }
  Clock::time_point end() const { return end_; }
  uint64_t errors() const { return errors_; }
  double seconds() const { return std::chrono::duration<double>(end_ - measure_start_).count(); }
  std::vector<uint32_t>& latencies_us() { return latencies_us_; }

 private:
  Clock::time_point measure_start_;
  Clock::time_point end_;
  uint64_t errors_ = 0;
  std::string first_error_;
  std::vector<uint32_t> latencies_us_;
};

// Whether the target accepts connections (REST: TCP; gRPC: the channel gets READY) within a
// few seconds; false with `error` saying why.
bool ProbeRest(const LevelSpec& spec, std::string* error);
bool ProbeGrpc(const LevelSpec& spec, std::string* error);

// Runs one level, closed loop (paced when spec.rate is set), on the calling thread; false with `error` set only when the
// level could not start at all (an unresolvable host).
bool RunRestLevel(const LevelSpec& spec, Tally* tally, std::string* error);
bool RunGrpcLevel(const LevelSpec& spec, Tally* tally, std::string* error);

// Whether a REST predict body's first `"key":` holds values equal to `expect`, value by value
// (text read back as float; nested arrays read flat), without building a JSON document per
// response.
bool RestBodyMatches(std::string_view body, std::string_view key, std::span<const float> expect);

// Whether `raw`, a v2 output's raw little-endian bytes of `datatype` (FP32 or INT64, read as
// float), holds exactly `expect`.
bool RawTensorMatches(std::string_view raw, std::string_view datatype, std::span<const float> expect);

}  // namespace lockstep::bench
