#include "server/predict_body_reader.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/tensor_json.h"
#include "server/json_tensor_sink.h"

namespace lockstep {

namespace od = simdjson::ondemand;
using simdjson::SUCCESS;

namespace {

// One JSON number as TensorFromJson reads it, before its dtype is known; false where the fast
// path declines it (NaN, Infinity, strings, TensorFromJson's NaN stand-ins).
bool ReadNumber(od::value& v, double* out) {
  if (v.get_double().get(*out) != SUCCESS || IsJsonSpecialSentinel(*out)) return false;
  // nlohmann reads "-0" (no fraction, no exponent) as the integer 0: +0.
  if (*out == 0 && std::signbit(*out)) {
    const std::string_view token = v.raw_json_token();
    if (token.find_first_of(".eE") == std::string_view::npos) *out = 0;
  }
  return true;
}

// One value: a number, or a list whose numbers are read here and whose lists recurse (the
// innermost lists hold nearly every number: no call per number).
bool Walk(od::value v, TensorSink<double>& sink) {
  od::json_type type;
  if (v.type().get(type) != SUCCESS) return false;
  if (type == od::json_type::number) {
    double value;
    return ReadNumber(v, &value) && sink.Number(value);
  }
  if (type != od::json_type::array) return false;
  od::array array;
  if (v.get_array().get(array) != SUCCESS || !sink.BeginArray()) return false;
  for (auto child : array) {
    od::value c;
    if (child.get(c) != SUCCESS || c.type().get(type) != SUCCESS) return false;
    if (type == od::json_type::number) {
      double value;
      if (!ReadNumber(c, &value) || !sink.Number(value)) return false;
    } else if (!Walk(c, sink)) {
      return false;
    }
  }
  return sink.EndArray();
}

}  // namespace

// The body read in one pass, before the signature is known: each tensor value's numbers (as
// doubles, which every number of a float32 or float64 input is read as first) and shape.
struct PredictBodyReader::State {
  od::parser parser;
  std::vector<char> padded;  // the body, with simdjson's padding after it
  std::vector<double> numbers;
  TensorSink<double> sink;
  struct Value {
    std::string name;  // the input it names; empty for the one unnamed value
    size_t begin = 0;  // into `numbers`
    size_t count = 0;
    Shape shape;
  };
  std::vector<Value> values;  // values[0, used)
  size_t used = 0;
  size_t next_number = 0;
  bool overflowed = false;  // a value had more numbers than `numbers` had room for

  // One tensor value into `numbers`.
  bool Read(od::value value, std::string_view name, bool row_format) {
    if (used == values.size()) values.emplace_back();
    Value& v = values[used++];
    v.name.assign(name);
    v.begin = next_number;
    sink.Reset(numbers.data() + next_number, numbers.size() - next_number);
    if (!Walk(value, sink) || !sink.Finish(row_format, &v.shape)) {
      overflowed = sink.count() == numbers.size() - v.begin;
      return false;
    }
    v.count = sink.count();
    next_number += v.count;
    return true;
  }

  bool ToTensor(const Value& v, DType dtype, Tensor* tensor) const {
    const double* numbers_begin = numbers.data() + v.begin;
    if (dtype != DType::kFloat32 && dtype != DType::kFloat64) return false;
    // The last request's tensor, when this one has its dtype and shape and nobody shares it.
    if (!tensor->Writable(dtype, v.shape)) *tensor = Tensor(dtype, v.shape);
    if (dtype == DType::kFloat64) {
      std::copy(numbers_begin, numbers_begin + v.count, tensor->mutable_data<double>().data());
      return true;
    }
    float* out = tensor->mutable_data<float>().data();
    for (size_t i = 0; i < v.count; ++i) {
      const std::optional<float> f = JsonNumberToFloat32(numbers_begin[i]);
      if (!f) return false;  // out of float32's range: the DOM path's error
      out[i] = *f;
    }
    return true;
  }
};

PredictBodyReader::PredictBodyReader() : state_(std::make_unique<State>()) {}
PredictBodyReader::~PredictBodyReader() = default;

void PredictBodyReader::ReleaseIfLarge() {
  // Bodies of short numbers ("0,0,0,...") grow `numbers` to four times the body.
  if (state_->numbers.size() > kMaxBodyBytes / 8 + 16) state_ = std::make_unique<State>();
}

bool PredictBodyReader::Start(std::string_view body) {
  State& s = *state_;
  if (body.size() > kMaxBodyBytes) return false;
  if (s.padded.size() < body.size() + simdjson::SIMDJSON_PADDING) s.padded.resize(body.size() + simdjson::SIMDJSON_PADDING);
  std::memcpy(s.padded.data(), body.data(), body.size());
  std::memset(s.padded.data() + body.size(), 0, simdjson::SIMDJSON_PADDING);
  // Room for a number per 8 bytes of body (what clients' floats take); a body of shorter
  // numbers is read again with room for its most (one character and a separator each).
  for (size_t room : {body.size() / 8 + 16, body.size() / 2 + 1}) {
    if (s.numbers.size() < room) s.numbers.resize(room);
    s.overflowed = false;
    if (Read(s, body.size())) return true;
    if (!s.overflowed) return false;
  }
  return false;
}

bool PredictBodyReader::Read(State& s, size_t size) {
  s.used = 0;
  s.next_number = 0;
  od::document document;
  if (s.parser.iterate(s.padded.data(), size, s.padded.size()).get(document) != SUCCESS) return false;
  od::object object;
  if (document.get_object().get(object) != SUCCESS) return false;
  bool instances = false, inputs = false, named = false;
  signature_name_.clear();
  for (auto field_result : object) {
    od::field field;
    std::string_view key;
    if (std::move(field_result).get(field) != SUCCESS || field.unescaped_key().get(key) != SUCCESS) return false;
    od::value value = field.value();
    if (key == "instances" && !instances && !inputs) {
      // One value (named instances, objects, are the DOM path's).
      instances = true;
      if (!s.Read(value, {}, /*row_format=*/true)) return false;
    } else if (key == "inputs" && !instances && !inputs) {
      inputs = true;
      od::json_type type;
      if (value.type().get(type) != SUCCESS) return false;
      if (type != od::json_type::object) {
        if (!s.Read(value, {}, /*row_format=*/false)) return false;
        continue;
      }
      od::object by_name;
      if (value.get_object().get(by_name) != SUCCESS) return false;
      for (auto input_result : by_name) {
        od::field input;
        std::string_view name;
        if (std::move(input_result).get(input) != SUCCESS || input.unescaped_key().get(name) != SUCCESS) return false;
        // An empty name could not tell itself from the unnamed value.
        if (name.empty() || !s.Read(input.value(), name, /*row_format=*/false)) return false;
      }
      if (s.used == 0) return false;  // {"inputs": {}}
    } else if (key == "signature_name" && !named) {
      named = true;
      std::string_view name;
      if (value.get_string().get(name) != SUCCESS) return false;
      signature_name_.assign(name);
    } else {
      return false;  // a repeated or unknown key, or both forms: the DOM path says which
    }
  }
  // Nothing may follow the object. (simdjson 3.0.1 has no document::at_end().)
  const char* end;
  if (document.current_location().get(end) != simdjson::OUT_OF_BOUNDS) return false;
  row_format_ = instances;
  return instances || inputs;
}

bool PredictBodyReader::DecodeInputs(const Signature& signature, std::vector<NamedTensor>* inputs) {
  const State& s = *state_;
  if (s.used != signature.inputs.size()) return false;
  inputs->resize(signature.inputs.size());
  if (s.values[0].name.empty()) {  // one unnamed value: the signature's only input
    (*inputs)[0].name = signature.inputs[0].key;
    return s.ToTensor(s.values[0], signature.inputs[0].dtype, &(*inputs)[0].tensor);
  }
  // As many names as inputs: each input named once means no name repeats or is unknown.
  for (size_t k = 0; k < signature.inputs.size(); ++k) {
    const TensorBinding& binding = signature.inputs[k];
    const State::Value* found = nullptr;
    for (size_t i = 0; i < s.used; ++i) {
      if (s.values[i].name != binding.key) continue;
      if (found != nullptr) return false;
      found = &s.values[i];
    }
    if (found == nullptr) return false;
    (*inputs)[k].name = binding.key;
    if (!s.ToTensor(*found, binding.dtype, &(*inputs)[k].tensor)) return false;
  }
  return true;
}

}  // namespace lockstep
