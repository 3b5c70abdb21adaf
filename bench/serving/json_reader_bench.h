// bench_json_reader: ways of decoding a TF Serving REST :predict body straight into a float
// buffer, without a DOM (json_reader_bench.cc has the table of candidates and the checks).
//
// What every candidate shares is declared here; what each one runs per number is in
// json_reader_sink.h (over the server's own shape check, server/json_tensor_sink.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace lockstep_bench {

// A request body in the server's buffer: `capacity` bytes from `data` may be read (simdjson
// reads up to 64 past the end; a buffer reserved with that much spare needs no copy).
struct Body {
  const char* data = nullptr;
  size_t size = 0;
  size_t capacity = 0;
};

inline constexpr int kMaxRank = 8;  // Shape::kMaxRank

// One float input ("x" in the bench's signature), decoded. `values` is preallocated: its
// size is the capacity, `count` the floats written.
struct Decoded {
  std::vector<float> values;
  size_t count = 0;
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  bool row_format = true;
  std::string signature_name;
};

class Candidate {
 public:
  virtual ~Candidate() = default;
  // True with `out` filled; false when the body is malformed or takes a form the fast path
  // leaves to today's path (which then also writes the error message).
  virtual bool Decode(const Body& body, Decoded& out) = 0;
  // Why the last Decode failed, for candidates that word it (today's path); empty otherwise.
  virtual std::string last_error() const { return {}; }
};

// A candidate by name. `decoder`: writes floats and checks the form (the references do neither).
struct Entry {
  std::string name;
  std::function<std::unique_ptr<Candidate>()> make;
  bool decoder;
};
// Every candidate (json_reader_candidates.cc).
std::vector<Entry> Entries();

// operator new calls so far (json_reader_alloc_count.cc replaces the global operator new).
int64_t AllocationCount();

// simdjson On-Demand (json_reader_simdjson_baseline.cc).
enum class SimdjsonKind {
  kCopy,        // memcpy into a reused padded buffer, then On-Demand
  kInPlace,     // the body's own buffer already has SIMDJSON_PADDING spare bytes
  kSumDoubles,  // reference: On-Demand walking every number as a double, no checks
};
std::unique_ptr<Candidate> MakeSimdjsonBaseline(SimdjsonKind kind);
// The name of simdjson's compile-time ("builtin") implementation in that translation unit:
// the one On-Demand runs.
const char* SimdjsonBaselineImpl();

}  // namespace lockstep_bench
