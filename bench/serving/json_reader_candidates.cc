// The candidates of bench_json_reader (json_reader_bench.cc says what each is and how they are
// checked and timed): nlohmann SAX, hand-rolled readers, today's DOM path, simdjson's DOM, and
// the server's own reader; the On-Demand ones are in json_reader_simdjson.inc.
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
#include <string>
#include <string_view>
#include <vector>

#include "bench/serving/json_reader_bench.h"
#include "bench/serving/json_reader_sink.h"
#include "runtime/graph.h"
#include "server/predict_body_reader.h"
#include "server/rest_json.h"

namespace lockstep_bench {
namespace {


// ---------------------------------------------------------------------------------------------
// nlohmann SAX

class NlohmannSax final : public Candidate {
 public:
  using json = nlohmann::json;

  bool Decode(const Body& body, Decoded& out) override {
    out_ = &out;
    object_depth_ = 0;
    expect_ = Expect::kKey;
    instances_ = inputs_ = have_x_ = false;
    in_named_ = false;
    const bool ok = json::sax_parse(body.data, body.data + body.size, this);
    return ok && (instances_ || (inputs_ && have_x_));
  }

  // The SAX interface.
  bool null() { return false; }
  bool boolean(bool) { return false; }
  bool number_integer(json::number_integer_t v) { return Number(static_cast<double>(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return Number(static_cast<double>(v)); }
  bool number_float(json::number_float_t v, const json::string_t&) { return Number(v); }
  bool string(json::string_t& s) {
    if (expect_ != Expect::kSignatureName) return false;
    out_->signature_name.assign(s);
    expect_ = Expect::kKey;
    return true;
  }
  bool binary(json::binary_t&) { return false; }
  bool start_object(size_t) {
    if (object_depth_ == 0) {
      object_depth_ = 1;
      return true;
    }
    if (expect_ != Expect::kInputs) return false;  // an object inside a float tensor
    object_depth_ = 2;
    in_named_ = true;
    have_x_ = false;
    expect_ = Expect::kKey;
    return true;
  }
  bool end_object() {
    --object_depth_;
    in_named_ = false;
    expect_ = Expect::kKey;
    return true;
  }
  bool key(json::string_t& k) {
    if (object_depth_ == 2) {
      if (k != "x") return false;
      StartTensor(false);
      return true;
    }
    if (k == "instances") {
      if (inputs_) return false;
      instances_ = true;
      StartTensor(true);
    } else if (k == "inputs") {
      if (instances_) return false;
      inputs_ = true;
      have_x_ = false;
      expect_ = Expect::kInputs;
      row_format_ = false;
      sink_.Reset(*out_);
    } else if (k == "signature_name") {
      expect_ = Expect::kSignatureName;
    } else {
      return false;
    }
    return true;
  }
  bool start_array(size_t) {
    if (expect_ == Expect::kInputs) expect_ = Expect::kTensor;
    return expect_ == Expect::kTensor && sink_.BeginArray();
  }
  bool end_array() {
    if (!sink_.EndArray()) return false;
    return sink_.depth() > 0 || EndTensor();
  }
  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception&) {
    error_position_ = position;  // today's message would be built from here
    return false;
  }

 private:
  enum class Expect { kKey, kTensor, kInputs, kSignatureName };

  void StartTensor(bool row_format) {
    expect_ = Expect::kTensor;
    row_format_ = row_format;
    sink_.Reset(*out_);
  }
  bool EndTensor() {
    if (!sink_.Finish(row_format_)) return false;
    if (!row_format_) have_x_ = true;
    expect_ = Expect::kKey;
    return true;
  }
  bool Number(double d) {
    if (expect_ == Expect::kInputs) expect_ = Expect::kTensor;  // "inputs": 3.5
    if (expect_ != Expect::kTensor) return false;
    float f;
    if (!ToFloat(d, &f) || !sink_.Number(f)) return false;
    return sink_.depth() > 0 || EndTensor();
  }

  Decoded* out_ = nullptr;
  FloatSink sink_;
  int object_depth_ = 0;
  Expect expect_ = Expect::kKey;
  bool row_format_ = true;
  bool instances_ = false, inputs_ = false, have_x_ = false, in_named_ = false;
  size_t error_position_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Hand-rolled recursive descent

enum class NumberMode {
  kFromCharsDouble,  // from_chars<double>, then today's float rule (two roundings, as today)
  kFromCharsFloat,   // from_chars<float>: one rounding (differs from today near float midpoints)
  kClinger,          // exact fast path where it applies, else from_chars<double>; as kFromCharsDouble
};

template <NumberMode kMode>
class HandRolled final : public Candidate {
 public:
  bool Decode(const Body& body, Decoded& out) override {
    begin_ = p_ = body.data;
    end_ = body.data + body.size;
    SkipSpace();
    if (!Eat('{')) return false;
    bool instances = false, inputs = false, have_x = false;
    for (;;) {
      std::string_view key;
      SkipSpace();
      if (!Key(&key)) return false;  // also "{}": today says the key is missing
      SkipSpace();
      if (!Eat(':')) return false;
      SkipSpace();
      if (key == "instances") {
        if (inputs) return false;
        instances = true;
        sink_.Reset(out);
        if (!Value(true)) return false;
      } else if (key == "inputs") {
        if (instances) return false;
        inputs = true;
        have_x = false;
        if (Eat('{')) {
          for (;;) {
            std::string_view name;
            SkipSpace();
            if (!Key(&name) || name != "x") return false;
            SkipSpace();
            if (!Eat(':')) return false;
            SkipSpace();
            sink_.Reset(out);
            if (!Value(false)) return false;
            have_x = true;
            SkipSpace();
            if (Eat(',')) continue;
            if (Eat('}')) break;
            return false;
          }
        } else {
          sink_.Reset(out);
          if (!Value(false)) return false;
          have_x = true;
        }
      } else if (key == "signature_name") {
        std::string_view name;
        if (!Key(&name)) return false;
        out.signature_name.assign(name);
      } else {
        return false;
      }
      SkipSpace();
      if (Eat(',')) continue;
      if (Eat('}')) break;
      return false;
    }
    SkipSpace();
    return p_ == end_ && (instances || (inputs && have_x));
  }

 private:
  void SkipSpace() {
    while (p_ < end_ && IsJsonSpace(*p_)) ++p_;
  }
  bool Eat(char c) {
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }
  // A string with no escapes and only printable ASCII; anything else is left to today's path
  // (which unescapes and checks UTF-8).
  bool Key(std::string_view* out) {
    if (!Eat('"')) return false;
    const char* start = p_;
    while (p_ < end_) {
      const unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        *out = std::string_view(start, static_cast<size_t>(p_ - start));
        ++p_;
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x80) return false;
      ++p_;
    }
    return false;
  }

  bool Value(bool row_format) { return Tensor() && sink_.Finish(row_format); }

  // One tensor value. Lists loop here, recursing only for nested lists (FloatSink bounds the
  // depth at kMaxRank).
  bool Tensor() {
    if (!Eat('[')) return Number();
    if (!sink_.BeginArray()) return false;
    SkipSpace();
    if (Eat(']')) return sink_.EndArray();
    for (;;) {
      if (p_ < end_ && *p_ == '[') {
        if (!Tensor()) return false;
      } else if (!Number()) {
        return false;
      }
      SkipSpace();
      if (p_ == end_) return false;
      const char c = *p_++;
      if (c == ']') return sink_.EndArray();
      if (c != ',') return false;
      SkipSpace();
    }
  }

  static bool IsDigit(char c) { return static_cast<unsigned char>(c - '0') <= 9; }

  // JSON's number grammar (from_chars alone would take "1.", ".5", "01", "inf", "nan"), then
  // std::from_chars on exactly those characters; or one of NaN, Infinity, -Infinity.
  // kClinger also gathers up to 19 significant digits while checking the grammar: when they fit
  // 53 bits and the power of ten is within 10^22, both are exact doubles and one multiply or
  // divide rounds correctly (Clinger's fast path, as fast_float and simdjson start with);
  // anything else goes to from_chars<double>.
  bool Number() {
    const char* start = p_;
    const char* q = p_;
    const bool negative = q < end_ && *q == '-';
    if (negative) ++q;
    if (q == end_) return false;
    if (!IsDigit(*q)) {
      const char* token_end = q;
      while (token_end < end_ && static_cast<unsigned char>((*token_end | 0x20) - 'a') < 26) ++token_end;
      float f;
      if (!SpecialToken(std::string_view(start, static_cast<size_t>(token_end - start)), &f)) return false;
      p_ = token_end;
      return sink_.Number(f);
    }
    uint64_t mantissa = 0;
    int digits = 0;         // significant digits in `mantissa`
    int64_t exponent = 0;   // of ten
    bool inexact = false;   // more than 19 significant digits
    auto digit = [&](char c, bool fraction) {
      if constexpr (kMode == NumberMode::kClinger) {
        if (mantissa == 0 && c == '0') {
          exponent -= fraction;
        } else if (digits < 19) {
          mantissa = mantissa * 10 + static_cast<uint64_t>(c - '0');
          ++digits;
          exponent -= fraction;
        } else {
          inexact = true;
          exponent += !fraction;
        }
      }
    };
    bool integer = true;
    if (*q == '0') {
      ++q;
    } else {
      while (q < end_ && IsDigit(*q)) digit(*q++, false);
    }
    if (q < end_ && *q == '.') {
      ++q;
      integer = false;
      if (q == end_ || !IsDigit(*q)) return false;
      while (q < end_ && IsDigit(*q)) digit(*q++, true);
    }
    if (q < end_ && (*q == 'e' || *q == 'E')) {
      ++q;
      integer = false;
      bool exponent_negative = false;
      if (q < end_ && (*q == '+' || *q == '-')) exponent_negative = *q++ == '-';
      if (q == end_ || !IsDigit(*q)) return false;
      int64_t e = 0;
      while (q < end_ && IsDigit(*q)) {
        if (e < 100000) e = e * 10 + (*q - '0');
        ++q;
      }
      exponent += exponent_negative ? -e : e;
    }
    float f;
    if constexpr (kMode == NumberMode::kFromCharsFloat) {
      // Out of float's range either way (past it, or below its smallest subnormal): left to
      // today's path, which clamps, refuses or reads 0 by its own rules.
      if (std::from_chars(start, q, f).ec != std::errc()) return false;
      if (std::fabs(f) == FLT_MAX) {
        double d;
        std::from_chars(start, q, d);
        if (!ToFloat(d, &f)) return false;
      }
    } else {
      double d;
      if (kMode == NumberMode::kClinger && !inexact && mantissa <= (uint64_t{1} << 53) && exponent >= -22 &&
          exponent <= 22) {
        static constexpr double kPowers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                             1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
        d = static_cast<double>(mantissa);
        d = exponent < 0 ? d / kPowers[-exponent] : d * kPowers[exponent];
        if (negative) d = -d;
      } else if (std::from_chars(start, q, d).ec != std::errc()) {
        return false;
      }
      if (!ToFloat(d, &f)) return false;
    }
    if (f == 0 && std::signbit(f) && integer) f = 0.0f;
    p_ = q;
    return sink_.Number(f);
  }

  const char* begin_ = nullptr;
  const char* p_ = nullptr;
  const char* end_ = nullptr;
  FloatSink sink_;
};

// ---------------------------------------------------------------------------------------------
// References

lockstep::Signature BenchSignature() {
  lockstep::Signature signature;
  signature.name = "serving_default";
  signature.method_name = "tensorflow/serving/predict";
  lockstep::TensorBinding x;
  x.key = "x";
  x.tensor = "x";
  x.dtype = lockstep::DType::kFloat32;
  x.shape = lockstep::Shape{-1, 784};
  x.any_shape = true;
  signature.inputs.push_back(x);
  return signature;
}

// Today's path: the server's own functions, then the tensor's floats copied out.
class Today final : public Candidate {
 public:
  bool Decode(const Body& body, Decoded& out) override {
    auto parsed = lockstep::ParsePredictBody(std::string_view(body.data, body.size));
    if (!parsed.ok()) {
      error = parsed.status().message();
      return false;
    }
    auto tensors = lockstep::DecodePredictInputs(*parsed, signature_);
    if (!tensors.ok()) {
      error = tensors.status().message();
      return false;
    }
    const lockstep::Tensor& t = (*tensors)[0].tensor;
    const auto values = t.data<float>();
    if (values.size() > out.values.size()) {
      error = "(bench) output buffer too small";
      return false;
    }
    std::memcpy(out.values.data(), values.data(), values.size() * sizeof(float));
    out.count = values.size();
    out.rank = t.shape().rank();
    for (int i = 0; i < out.rank; ++i) out.dims[i] = t.shape()[i];
    out.row_format = parsed->row_format;
    out.signature_name = parsed->signature_name;
    return true;
  }
  std::string last_error() const override { return error; }
  std::string error;

 private:
  lockstep::Signature signature_ = BenchSignature();
};

class NlohmannDomOnly final : public Candidate {
 public:
  bool Decode(const Body& body, Decoded& out) override {
    nlohmann::json j = nlohmann::json::parse(body.data, body.data + body.size, nullptr, false);
    out.count = j.size();
    return !j.is_discarded();
  }
};

class SimdjsonDom final : public Candidate {
 public:
  bool Decode(const Body& body, Decoded& out) override {
    if (padded_capacity_ < body.size + simdjson::SIMDJSON_PADDING) {
      padded_capacity_ = body.size + simdjson::SIMDJSON_PADDING;
      padded_ = std::make_unique<char[]>(padded_capacity_);
    }
    std::memcpy(padded_.get(), body.data, body.size);
    simdjson::dom::element root;
    // Note: the DOM parser refuses integer literals past 64 bits (NUMBER_ERROR in 3.0.1), which
    // JSON allows and nlohmann and On-Demand's get_double() read.
    if (parser_.parse(padded_.get(), body.size, false).get(root) != simdjson::SUCCESS) return false;
    out.count = 1;
    return true;
  }

 private:
  simdjson::dom::parser parser_;
  std::unique_ptr<char[]> padded_;
  size_t padded_capacity_ = 0;
};

// simdjson's DOM parser (reused: its tape and string buffers are kept, nothing is allocated
// per call) then a walk of the tape into the floats, with the same checks. The parse is the
// library's, runtime-dispatched (AVX-512 here), so no per-ISA build is needed. It refuses NaN
// and Infinity tokens and integers past 64 bits, and cannot tell "-0" from "-0.0" (today
// reads +0 for the first): all three are left to today's path.
class SimdjsonDomWalk final : public Candidate {
 public:
  bool Decode(const Body& body, Decoded& out) override {
    const char* data = body.data;
    if (body.capacity < body.size + simdjson::SIMDJSON_PADDING) {
      if (padded_capacity_ < body.size + simdjson::SIMDJSON_PADDING) {
        padded_capacity_ = body.size + simdjson::SIMDJSON_PADDING;
        padded_ = std::make_unique<char[]>(padded_capacity_);
      }
      std::memcpy(padded_.get(), body.data, body.size);
      data = padded_.get();
    }
    simdjson::dom::object object;
    if (parser_.parse(data, body.size, false).get(object) != simdjson::SUCCESS) return false;
    bool instances = false, inputs = false, have_x = false;
    for (simdjson::dom::key_value_pair field : object) {
      if (field.key == "instances") {
        if (inputs) return false;
        instances = true;
        sink_.Reset(out);
        if (!Walk(field.value) || !sink_.Finish(true)) return false;
      } else if (field.key == "inputs") {
        if (instances) return false;
        inputs = true;
        have_x = false;
        simdjson::dom::object named;
        if (field.value.get_object().get(named) == simdjson::SUCCESS) {
          for (simdjson::dom::key_value_pair input : named) {
            if (input.key != "x") return false;
            sink_.Reset(out);
            if (!Walk(input.value) || !sink_.Finish(false)) return false;
            have_x = true;
          }
        } else {
          sink_.Reset(out);
          if (!Walk(field.value) || !sink_.Finish(false)) return false;
          have_x = true;
        }
      } else if (field.key == "signature_name") {
        std::string_view name;
        if (field.value.get_string().get(name) != simdjson::SUCCESS) return false;
        out.signature_name.assign(name);
      } else {
        return false;
      }
    }
    return instances || (inputs && have_x);
  }

 private:
  bool Walk(simdjson::dom::element e) {
    using simdjson::dom::element_type;
    double d;
    switch (e.type()) {
      case element_type::ARRAY: {
        if (!sink_.BeginArray()) return false;
        for (simdjson::dom::element child : simdjson::dom::array(e)) {
          if (!Walk(child)) return false;
        }
        return sink_.EndArray();
      }
      case element_type::DOUBLE: d = double(e); break;
      case element_type::INT64: d = static_cast<double>(int64_t(e)); break;
      case element_type::UINT64: d = static_cast<double>(uint64_t(e)); break;
      default: return false;
    }
    float f;
    if ((d == 0 && std::signbit(d)) || !ToFloat(d, &f)) return false;
    return sink_.Number(f);
  }

  simdjson::dom::parser parser_;
  std::unique_ptr<char[]> padded_;
  size_t padded_capacity_ = 0;
  FloatSink sink_;
};

// ---------------------------------------------------------------------------------------------
// Candidates and bodies

// The server's own reader (server/predict_body_reader.h), into a tensor, then copied out.
class ServerReader final : public Candidate {
 public:
  ServerReader() {
    lockstep::TensorBinding x;
    x.key = x.tensor = "x";
    x.dtype = lockstep::DType::kFloat32;
    x.shape = lockstep::Shape{-1, -1};
    signature_.name = "serving_default";
    signature_.inputs = {x};
  }

  bool Decode(const Body& body, Decoded& out) override {
    if (!reader_.Start(std::string_view(body.data, body.size)) || !reader_.DecodeInputs(signature_, &inputs_)) {
      return false;
    }
    const lockstep::Tensor& t = inputs_[0].tensor;
    const std::span<const float> values = t.data<float>();
    if (values.size() > out.values.size()) return false;
    std::copy(values.begin(), values.end(), out.values.begin());
    out.count = values.size();
    out.rank = t.shape().rank();
    for (int i = 0; i < out.rank; ++i) out.dims[i] = t.shape()[i];
    out.row_format = reader_.row_format();
    out.signature_name = reader_.signature_name();
    return true;
  }

 private:
  lockstep::Signature signature_;
  lockstep::PredictBodyReader reader_;
  std::vector<lockstep::NamedTensor> inputs_;
};

}  // namespace

std::vector<Entry> Entries() {
  std::vector<Entry> e;
  e.push_back({"today", [] { return std::make_unique<Today>(); }, true});
  e.push_back({"nlohmann_dom", [] { return std::make_unique<NlohmannDomOnly>(); }, false});
  e.push_back({"nlohmann_sax", [] { return std::make_unique<NlohmannSax>(); }, true});
  e.push_back({"handrolled_f64", [] { return std::make_unique<HandRolled<NumberMode::kFromCharsDouble>>(); }, true});
  e.push_back({"handrolled_f32", [] { return std::make_unique<HandRolled<NumberMode::kFromCharsFloat>>(); }, true});
  e.push_back({"handrolled_fast", [] { return std::make_unique<HandRolled<NumberMode::kClinger>>(); }, true});
  e.push_back({"simdjson_copy", [] { return MakeSimdjsonBaseline(SimdjsonKind::kCopy); }, true});
  e.push_back({"simdjson_inplace", [] { return MakeSimdjsonBaseline(SimdjsonKind::kInPlace); }, true});
  e.push_back({"simdjson_sum", [] { return MakeSimdjsonBaseline(SimdjsonKind::kSumDoubles); }, false});
  e.push_back({"server_reader", [] { return std::make_unique<ServerReader>(); }, true});
  e.push_back({"simdjson_dom_walk", [] { return std::make_unique<SimdjsonDomWalk>(); }, true});
  e.push_back({"simdjson_dom", [] { return std::make_unique<SimdjsonDom>(); }, false});
  return e;
}

}  // namespace lockstep_bench
