// How should model-server decode a TF Serving REST :predict body without building a DOM?
// Candidates, each writing the numbers straight into a preallocated float buffer and checking
// the form (object, keys, nested lists, rectangular shape), reused across calls:
//   simdjson_*     simdjson On-Demand (libsimdjson-dev 3.0.1), built for baseline x86-64 as the
//                  server is (AVX2 and AVX-512 builds measured within noise of it); "copy"
//                  copies the body into a reused padded buffer first, "inplace" reads a body
//                  whose buffer already has 64 spare bytes
//   server_reader  the server's own reader (server/predict_body_reader.h), which the above
//                  chose: simdjson On-Demand into a tensor
//   nlohmann_sax   nlohmann::json::sax_parse with a handler writing the floats
//   handrolled_f64 recursive descent over std::string_view, numbers checked against JSON's
//                  grammar and read with std::from_chars<double>, then today's float rule
//   handrolled_f32 the same, std::from_chars<float> (one rounding, not two; see the checks)
//   handrolled_fast the same as _f64, with Clinger's exact fast path before from_chars<double>
//   simdjson_dom_walk simdjson's DOM parser, reused (a flat tape in its own buffers, no
//                  allocation per call; runtime-dispatched), then the tape walked into floats
// and the references:
//   today          ParsePredictBody + DecodePredictInputs (nlohmann DOM, then Tensor), copied
//   nlohmann_dom   nlohmann::json::parse alone
//   simdjson_*_sum On-Demand reading every number as a double, no checks ("simdjson's own")
//   simdjson_dom   simdjson::dom::parser::parse of the padded body (the library's runtime
//                  dispatch: AVX-512 where the CPU has it)
// Bodies: one row of 784 floats (a 28x28 image), a batch of 32 such rows, the same row in the
// columnar form {"inputs": {"x": [[...]]}}, and the row as a Python client holding float32
// values sends it (json.dumps(array.tolist()): each float widened to double, up to 17 digits,
// in Python's repr). Each comes in several variants (64 of the single rows, 2 of the batch)
// that the timing loop cycles through: one 9 KB body repeated is learnt by the branch
// predictor. MB/s and the time per body are over CPU time.
//
// Before timing, main checks, and aborts on a failure: every candidate decodes every body to
// exactly the floats that were printed; on 100k-number bodies of six kinds the candidates
// agree bit for bit with today's path (handrolled_f32 is only reported); on 200k mutated
// bodies none accepts what today's path refuses or reads a value differently. It prints how each handles the edge cases (NaN,
// -0, ranges, malformed bodies) beside today's error message.
//
//   nice build-json/bench/bench_json_reader --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

#include <benchmark/benchmark.h>
#include <simdjson.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bench/serving/json_reader_bench.h"
#include "bench/serving/json_reader_sink.h"
#include "runtime/graph.h"
#include "server/rest_json.h"

namespace lockstep_bench {
namespace {

// A body in a buffer with simdjson's padding to spare, as the server could receive it.
struct OwnedBody {
  std::string text;
  OwnedBody() = default;
  explicit OwnedBody(std::string s) : text(std::move(s)) { text.reserve(text.size() + simdjson::SIMDJSON_PADDING); }
  Body view() const { return {text.data(), text.size(), text.capacity() + 1}; }
};

std::string FloatText(float f) {
  char buf[64];
  return std::string(buf, std::to_chars(buf, buf + sizeof(buf), f).ptr);
}
std::string DoubleText(double d) {
  char buf[64];
  return std::string(buf, std::to_chars(buf, buf + sizeof(buf), d).ptr);
}
// Python's repr of a float, which json.dumps writes: the shortest digits, in exponent form when
// the exponent is below -4 or at least 16, else positional with at least one fractional digit.
std::string PythonRepr(double d) {
  char buf[64];
  const std::string scientific(buf, std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific).ptr);
  const int exponent = std::atoi(scientific.c_str() + scientific.find('e') + 1);
  if (exponent < -4 || exponent >= 16) {
    // "1.5e-07", "1e+16": Python writes at least two exponent digits, as to_chars does.
    return scientific;
  }
  std::string fixed(buf, std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::fixed).ptr);
  if (fixed.find('.') == std::string::npos) fixed += ".0";
  return fixed;
}

// What an image-ish model gets: mostly [0, 1) (normalised pixels), some negatives (standardised
// features), some whole numbers (raw pixels; they print without a fraction), some tiny and
// large magnitudes (they print with exponents).
std::vector<float> RandomFloats(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> pick(0, 99), pixel(0, 255), small_exp(5, 12), large_exp(6, 20);
  std::vector<float> v(n);
  for (float& f : v) {
    const int k = pick(rng);
    if (k < 70) f = unit(rng);
    else if (k < 80) f = normal(rng);
    else if (k < 88) f = static_cast<float>(pixel(rng));
    else if (k < 95) f = unit(rng) * std::pow(10.0f, -static_cast<float>(small_exp(rng)));
    else f = (unit(rng) - 0.5f) * std::pow(10.0f, static_cast<float>(large_exp(rng)));
  }
  return v;
}

// Rows of `cols` values, as json.dumps writes them: ", " between values.
std::string Rows(const std::vector<std::string>& texts, size_t rows, size_t cols) {
  std::string s = "[";
  for (size_t r = 0; r < rows; ++r) {
    s += r ? ", [" : "[";
    for (size_t c = 0; c < cols; ++c) {
      if (c) s += ", ";
      s += texts[r * cols + c];
    }
    s += "]";
  }
  return s + "]";
}

// One kind of body, in several variants with different numbers: the benchmark cycles through
// them, so that the branch predictor cannot learn one body's digit counts by heart (with a
// single 9 KB body repeated, it does, and every decoder looks faster than it is).
struct BenchBody {
  std::string name;
  std::vector<OwnedBody> variants;
  std::vector<std::vector<float>> expected;
  int64_t rows;
};

std::vector<BenchBody> BenchBodies() {
  constexpr int kRowVariants = 64, kBatchVariants = 2;
  std::mt19937_64 rng(20240611);
  auto texts = [](const std::vector<float>& v, bool as_double) {
    std::vector<std::string> t;
    for (float f : v) t.push_back(as_double ? PythonRepr(static_cast<double>(f)) : FloatText(f));
    return t;
  };
  BenchBody row{"row_784", {}, {}, 1}, batch{"row_32x784", {}, {}, 32}, columnar{"columnar_784", {}, {}, 1},
      py64{"row_784_py64", {}, {}, 1};
  for (int i = 0; i < kRowVariants; ++i) {
    std::vector<float> one = RandomFloats(784, rng);
    row.variants.emplace_back("{\"instances\": " + Rows(texts(one, false), 1, 784) + "}");
    columnar.variants.emplace_back("{\"inputs\": {\"x\": " + Rows(texts(one, false), 1, 784) + "}}");
    py64.variants.emplace_back("{\"instances\": " + Rows(texts(one, true), 1, 784) + "}");
    row.expected.push_back(one);
    columnar.expected.push_back(one);
    py64.expected.push_back(one);
  }
  for (int i = 0; i < kBatchVariants; ++i) {
    std::vector<float> rows = RandomFloats(32 * 784, rng);
    batch.variants.emplace_back("{\"instances\": " + Rows(texts(rows, false), 32, 784) + "}");
    batch.expected.push_back(std::move(rows));
  }
  return {std::move(row), std::move(columnar), std::move(py64), std::move(batch)};
}

size_t MeanSize(const BenchBody& b) {
  size_t total = 0;
  for (const OwnedBody& v : b.variants) total += v.text.size();
  return total / b.variants.size();
}

// ---------------------------------------------------------------------------------------------
// Checks

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "CHECK FAILED: %s\n", what.c_str());
  std::abort();
}

bool SameBits(const float* a, const float* b, size_t n, size_t* first_difference) {
  for (size_t i = 0; i < n; ++i) {
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) {
      *first_difference = i;
      return false;
    }
  }
  return true;
}

bool SameDecoded(const Decoded& a, const Decoded& b, size_t* first_difference) {
  *first_difference = 0;
  if (a.count != b.count || a.rank != b.rank || a.row_format != b.row_format || a.signature_name != b.signature_name) {
    return false;
  }
  for (int i = 0; i < a.rank; ++i) {
    if (a.dims[i] != b.dims[i]) return false;
  }
  return SameBits(a.values.data(), b.values.data(), a.count, first_difference);
}

Decoded MakeDecoded(size_t capacity) {
  Decoded d;
  d.values.assign(capacity, -12345.0f);
  return d;
}

struct Live {
  std::string name;
  std::unique_ptr<Candidate> candidate;
  bool decoder;
};

std::vector<Live> LiveCandidates(bool decoders_only) {
  std::vector<Live> live;
  for (Entry& e : Entries()) {
    if (decoders_only && !e.decoder) continue;
    live.push_back({e.name, e.make(), e.decoder});
  }
  return live;
}

// 1. Every decoder reads every bench body as exactly the floats that were printed.
void CheckBenchBodies(const std::vector<BenchBody>& bodies) {
  std::vector<Live> live = LiveCandidates(true);
  for (const BenchBody& b : bodies) {
    for (Live& c : live) {
      for (size_t v = 0; v < b.variants.size(); ++v) {
        const std::vector<float>& expected = b.expected[v];
        Decoded out = MakeDecoded(expected.size());
        if (!c.candidate->Decode(b.variants[v].view(), out)) Fail(c.name + " refused " + b.name);
        size_t at = 0;
        if (out.count != expected.size() || out.rank != 2 || out.dims[0] != b.rows || out.dims[1] != 784 ||
            !SameBits(out.values.data(), expected.data(), out.count, &at)) {
          Fail(c.name + " read " + b.name + " differently, first at element " + std::to_string(at));
        }
      }
    }
    std::printf("check bench body %-13s %zu variants, %6zu bytes each on average: all %zu decoders read the printed floats bit for bit\n",
                b.name.c_str(), b.variants.size(), MeanSize(b), live.size());
  }
  const std::string& sample = bodies[2].variants[0].text;
  std::printf("  e.g. %s ... %s\n", bodies[0].variants[0].text.substr(0, 120).c_str(),
              sample.substr(0, 120).c_str());
}

// 2. 100k numbers of each kind, as one list: the decoders against today's path, and today's
// path against the correctly rounded float (std::from_chars<float>).
void CheckNumberKinds() {
  constexpr size_t kCount = 100000;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint32_t> bits32;
  std::uniform_int_distribution<uint64_t> bits64;
  std::uniform_real_distribution<double> log_magnitude(-38.0, 38.0);
  std::uniform_int_distribution<int> digits(17, 25);
  std::uniform_int_distribution<int> sign(0, 1);

  struct Kind {
    const char* name;
    std::function<std::string()> next;
  };
  std::vector<float> bench_floats = RandomFloats(kCount, rng);
  size_t bench_i = 0;
  auto random_finite_float = [&] {
    for (;;) {
      const float f = std::bit_cast<float>(bits32(rng));
      if (std::isfinite(f)) return f;
    }
  };
  const std::vector<Kind> kinds = {
      {"float shortest (bench mix)", [&] { return FloatText(bench_floats[bench_i++ % kCount]); }},
      {"float shortest (any bits)", [&] { return FloatText(random_finite_float()); }},
      {"float as double, 17 digits", [&] { return DoubleText(static_cast<double>(random_finite_float())); }},
      {"double shortest, 1e-38..1e38", [&] {
         const double d = std::pow(10.0, log_magnitude(rng)) * (sign(rng) ? -1 : 1);
         return DoubleText(d);
       }},
      {"near a float midpoint, 17-25 digits", [&] {
         // Halfway between two adjacent floats (exact in a double), printed to 17-25 digits:
         // the nearest double is often the midpoint itself, where float rounding ties.
         float f = random_finite_float();
         if (std::fabs(f) >= FLT_MAX) f = 1.5f;
         const double mid = (static_cast<double>(f) + static_cast<double>(std::nextafter(f, INFINITY))) / 2;
         char buf[64];
         return std::string(buf, std::to_chars(buf, buf + sizeof(buf), mid, std::chars_format::scientific, digits(rng) - 1).ptr);
       }},
      {"integers up to 2^64", [&] {
         const int shift = static_cast<int>(bits64(rng) % 64);
         const uint64_t u = bits64(rng) >> shift;
         return (sign(rng) ? "-" : "") + std::to_string(u >> 1);
       }},
  };
  std::vector<Live> live = LiveCandidates(true);
  for (const Kind& kind : kinds) {
    std::vector<std::string> texts(kCount);
    for (std::string& t : texts) t = kind.next();
    std::string s = "{\"instances\": [";
    for (size_t i = 0; i < kCount; ++i) {
      if (i) s += ", ";
      s += texts[i];
    }
    s += "]}";
    const OwnedBody body(s);
    // The correctly rounded float of each text (one rounding, decimal to float).
    std::vector<float> exact(kCount);
    size_t exact_out_of_range = 0;
    for (size_t i = 0; i < kCount; ++i) {
      if (std::from_chars(texts[i].data(), texts[i].data() + texts[i].size(), exact[i]).ec != std::errc()) {
        exact[i] = std::numeric_limits<float>::quiet_NaN();
        ++exact_out_of_range;
      }
    }
    Decoded today = MakeDecoded(kCount);
    if (!live[0].candidate->Decode(body.view(), today)) Fail(std::string("today refused the list of ") + kind.name);
    size_t double_rounded = 0, minus_zero = 0;
    std::string example;
    for (size_t i = 0; i < kCount; ++i) {
      if (std::isnan(exact[i])) continue;
      if (std::bit_cast<uint32_t>(exact[i]) != std::bit_cast<uint32_t>(today.values[i])) {
        if (texts[i] == "-0") {
          ++minus_zero;  // nlohmann's integer 0: today reads +0
        } else if (double_rounded++ == 0) {
          example = texts[i] + " -> today " + FloatText(today.values[i]) + ", correctly rounded " + FloatText(exact[i]);
        }
      }
    }
    std::printf("check numbers: %-36s today vs correctly rounded float: %zu differ%s%s%s\n", kind.name, double_rounded,
                exact_out_of_range ? (" (" + std::to_string(exact_out_of_range) + " past float's range skipped)").c_str() : "",
                minus_zero ? (" (and " + std::to_string(minus_zero) + " \"-0\", read as +0 by today)").c_str() : "",
                example.empty() ? "" : ("  e.g. " + example).c_str());
    for (size_t c = 1; c < live.size(); ++c) {
      Decoded out = MakeDecoded(kCount);
      const bool ok = live[c].candidate->Decode(body.view(), out);
      size_t at = 0;
      const bool same = ok && SameDecoded(today, out, &at);
      if (!same) {
        std::string what = live[c].name + (ok ? " differs from today at " + texts[at] + ": " + FloatText(out.values[at]) +
                                                    " vs " + FloatText(today.values[at])
                                              : " declined");
        if (!ok) {
          // Not wrong (today's path would run), but worth knowing: simdjson's DOM refuses
          // integer literals past 64 bits, which these lists can hold.
          std::printf("    %s declined the whole list (left to today's path)\n", live[c].name.c_str());
        } else if (live[c].name == "handrolled_f32") {
          size_t differ = 0;
          for (size_t i = 0; ok && i < kCount; ++i) differ += std::bit_cast<uint32_t>(out.values[i]) != std::bit_cast<uint32_t>(today.values[i]);
          std::printf("    %s (expected for from_chars<float>: %zu of %zu differ)\n", what.c_str(), differ, kCount);
        } else {
          Fail(what + " on the list of " + kind.name);
        }
      }
    }
  }
}

std::string Describe(bool ok, const Decoded& d) {
  if (!ok) return "declined";
  std::string s = "[";
  for (int i = 0; i < d.rank; ++i) s += (i ? "," : "") + std::to_string(d.dims[i]);
  s += "]";
  for (size_t i = 0; i < d.count && i < 3; ++i) {
    const float f = d.values[i];
    char buf[32];
    std::snprintf(buf, sizeof(buf), " %08x", std::bit_cast<uint32_t>(f));
    s += std::isnan(f) ? " NaN" : " " + FloatText(f) + buf;
  }
  return s;
}

// 3. Edge cases: what each decoder does, beside today's result or message.
void PrintEdgeCases() {
  const char* cases[] = {
      R"({"instances": [[-0]]})",
      R"({"instances": [[-0.0]]})",
      R"({"instances": [[1e-50]]})",
      R"({"instances": [[1e-400]]})",
      R"({"instances": [[3.4028235e38]]})",
      R"({"instances": [[3.40282356e38]]})",
      R"({"instances": [[3.4028236e38]]})",
      R"({"instances": [[1e400]]})",
      R"({"instances": [[NaN, Infinity, -Infinity]]})",
      R"({"instances": [[1.25e308]]})",
      R"({"instances": [[-NaN]]})",
      R"({"instances": [[nan]]})",
      R"({"instances": [[1.]]})",
      R"({"instances": [[.5]]})",
      R"({"instances": [[01]]})",
      R"({"instances": [[+1]]})",
      R"({"instances": [[16777217]]})",
      R"({"instances": [[16777217.000000001]]})",
      R"({"instances": [[123456789012345678901234567890]]})",
      R"({"instances": [[1, 2], [3]]})",
      R"({"instances": [[1, 2]])",
      R"({"instances": [[1, 2]]} x)",
      R"({"instances": [[1 2]]})",
      R"({"instances": [[1,,2]]})",
      R"({"instances": [[1,]]})",
      R"({"instances": [[1]], "instances": [[2, 3]]})",
      R"({"instances": []})",
      R"({"inputs": []})",
      R"({"inputs": 2.5})",
      R"({"instances": [[1]], "inputs": [[1]]})",
      R"({"instances": [["a"]]})",
      R"({"instances": [[true]]})",
      R"({"instances": [{"x": [1, 2]}]})",
      R"({"inputs": {"x": [[1]], "y": [[2]]}})",
      R"({"inputs": {}})",
      R"({"instances": [[1]], "foo": 1})",
      R"({"instances": [[[[[[[[[1]]]]]]]]]})",
      "\xEF\xBB\xBF{\"instances\": [[1]]}",
      R"({"instances": [[1]], "signature_name": "\u0041"})",
      "{\"instances\": [[1]], \"signature_name\": \"\xff\"}",
      R"({"instances": [[1]]})"
      "\n",
  };
  std::vector<Live> live = LiveCandidates(true);
  // One simdjson build is enough here: the three share their source.
  std::erase_if(live, [](const Live& l) { return l.name.starts_with("simdjson_") && l.name != "simdjson_copy" &&
                                 l.name != "simdjson_dom_walk"; });
  std::printf("\nedge cases (value: shape, then up to 3 values with their bits; declined: left to today's path)\n");
  for (const char* text : cases) {
    const OwnedBody body(text);
    std::string shown = text;
    for (char& c : shown) {
      if (c == '\n') c = ' ';
      if (static_cast<unsigned char>(c) >= 0x80) c = '?';
    }
    std::printf("  %s\n", shown.c_str());
    Candidate* today = live[0].candidate.get();  // Entries() lists today's path first
    Decoded t = MakeDecoded(64);
    const bool today_ok = today->Decode(body.view(), t);
    std::printf("    %-22s %s\n", "today", today_ok ? Describe(true, t).c_str() : ("error: " + today->last_error()).c_str());
    for (size_t c = 1; c < live.size(); ++c) {
      Decoded out = MakeDecoded(64);
      const bool ok = live[c].candidate->Decode(body.view(), out);
      size_t at;
      const char* verdict = !ok ? "" : !today_ok ? "   <-- ACCEPTS WHAT TODAY REFUSES" : SameDecoded(t, out, &at) ? "" : "   <-- DIFFERS FROM TODAY";
      std::printf("    %-22s %s%s\n", live[c].name.c_str(), Describe(ok, out).c_str(), verdict);
    }
  }
  std::printf("\n");
}

// 4. Mutated bodies: a decoder may decline what today's path accepts (today's path then runs),
// but must never accept what it refuses, nor read a value or shape differently.
void CheckMutations() {
  const std::string seeds[] = {
      R"({"instances": [[1.5, -2, 3e4], [NaN, 0.1, -Infinity]]})",
      R"({"inputs": {"x": [[1, 2], [3, 4]]}, "signature_name": "serving_default"})",
      R"({"signature_name": "s", "inputs": [1.25, 2.5e-3, -0.0]})",
      R"({"instances": [[[1], [2]], [[3], [4]]]})",
      R"({"inputs": 7, "signature_name": "a"})",
      R"({"instances": [[0.123456789, 1E-7, 12345678901234567890]]})",
  };
  const std::string alphabet = "[]{}\",:0123456789.eE-+ NaIfinty\t\nxs";
  constexpr int kMutations = 200000;
  std::mt19937_64 rng(99);
  std::vector<Live> live = LiveCandidates(true);
  std::erase_if(live, [](const Live& l) { return l.name.ends_with("_inplace"); });  // same code as _copy
  Candidate* today = live[0].candidate.get();  // Entries() lists today's path first
  std::vector<int64_t> accepted(live.size()), declined(live.size()), bad(live.size());
  std::vector<std::string> first_declined(live.size());
  int64_t today_accepts = 0;
  for (int m = 0; m < kMutations; ++m) {
    std::string s = seeds[rng() % std::size(seeds)];
    const int ops = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < ops && !s.empty(); ++k) {
      const size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0: s[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: s.insert(s.begin() + static_cast<ptrdiff_t>(at), alphabet[rng() % alphabet.size()]); break;
        case 2: s.erase(at, 1); break;
        case 3: s.insert(at, s.substr(at, rng() % 6)); break;
      }
    }
    const OwnedBody body(s);
    Decoded t = MakeDecoded(64);
    const bool today_ok = today->Decode(body.view(), t);
    today_accepts += today_ok;
    for (size_t c = 1; c < live.size(); ++c) {
      Decoded out = MakeDecoded(64);
      const bool ok = live[c].candidate->Decode(body.view(), out);
      size_t at = 0;
      if (ok && today_ok && SameDecoded(t, out, &at)) {
        ++accepted[c];
      } else if (!ok) {
        declined[c] += today_ok;
        if (today_ok && first_declined[c].empty()) first_declined[c] = s;
      } else {
        if (bad[c]++ < 3) {
          std::printf("  %s %s: %s  (today: %s)\n", live[c].name.c_str(), today_ok ? "differs" : "accepts", s.c_str(),
                      today_ok ? Describe(true, t).c_str() : today->last_error().c_str());
        }
      }
    }
  }
  std::printf("check mutations: %d mutated bodies, today's path accepts %lld\n", kMutations, static_cast<long long>(today_accepts));
  bool failed = false;
  for (size_t c = 1; c < live.size(); ++c) {
    std::printf("  %-24s same as today %7lld, left to today (today accepts) %6lld, wrong %lld%s%s\n", live[c].name.c_str(),
                static_cast<long long>(accepted[c]), static_cast<long long>(declined[c]), static_cast<long long>(bad[c]),
                first_declined[c].empty() ? "" : "; first left: ", first_declined[c].c_str());
    failed = failed || bad[c] > 0;
  }
  if (failed) Fail("a decoder accepted a body today's path refuses, or read it differently");
}

// ---------------------------------------------------------------------------------------------
// Benchmarks

void RegisterBenchmarks(std::vector<BenchBody>& bodies, std::vector<Live>& candidates) {
  for (Live& c : candidates) {
    for (BenchBody& b : bodies) {
      Candidate* candidate = c.candidate.get();
      const BenchBody* body = &b;
      benchmark::RegisterBenchmark((c.name + "/" + b.name).c_str(), [candidate, body](benchmark::State& state) {
        Decoded out = MakeDecoded(body->expected[0].size());
        std::vector<Body> views;
        for (const OwnedBody& v : body->variants) {
          views.push_back(v.view());
          if (!candidate->Decode(views.back(), out)) {  // also warms: parser buffers sized
            state.SkipWithError("declined the body");
            return;
          }
        }
        const int64_t allocations_before = AllocationCount();
        size_t next = 0;
        int64_t bytes = 0;
        for (auto _ : state) {
          const Body& view = views[next];
          next = next + 1 == views.size() ? 0 : next + 1;
          const bool ok = candidate->Decode(view, out);
          bytes += static_cast<int64_t>(view.size);
          benchmark::DoNotOptimize(ok);
          benchmark::DoNotOptimize(out.values.data());
          benchmark::ClobberMemory();
        }
        const double iterations = static_cast<double>(state.iterations());
        state.SetBytesProcessed(bytes);
        state.counters["MB/s"] = benchmark::Counter(static_cast<double>(bytes) / 1e6, benchmark::Counter::kIsRate);
        state.counters["allocs"] = static_cast<double>(AllocationCount() - allocations_before) / iterations;
        state.counters["rows"] = static_cast<double>(body->rows);
      })->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace
}  // namespace lockstep_bench

int main(int argc, char** argv) {
  using namespace lockstep_bench;
  benchmark::Initialize(&argc, argv);
#define LOCKSTEP_STR2(x) #x
#define LOCKSTEP_STR(x) LOCKSTEP_STR2(x)
  std::printf("simdjson %s; On-Demand builtin implementation: %s; DOM (runtime dispatch)=%s\n",
              LOCKSTEP_STR(SIMDJSON_VERSION), SimdjsonBaselineImpl(),
              simdjson::get_active_implementation()->name().c_str());
  std::vector<BenchBody> bodies = BenchBodies();
  CheckBenchBodies(bodies);
  CheckNumberKinds();
  CheckMutations();
  PrintEdgeCases();
  std::fflush(stdout);
  std::vector<Live> candidates = LiveCandidates(false);
  RegisterBenchmarks(bodies, candidates);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
