#include "server/open_inference/rest_infer.h"

#include <simdjson.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/bfloat16.h"
#include "runtime/tensor_json.h"
#include "server/open_inference/datatype.h"

namespace lockstep::open_inference {

namespace od = simdjson::ondemand;
using simdjson::SUCCESS;

namespace {

Status Malformed(simdjson::error_code error, std::string_view where) {
  return InvalidArgument("malformed inference request: " + std::string(where) + ": " +
                         simdjson::error_message(error));
}

// Calls `visit(key, value)` for each field of `object` in the body's order, and stops at the
// first error. A malformed field is Malformed(error, where()): `where` is called only then, so
// that the hot path builds no message.
template <typename Object, typename Where, typename Visit>
Status ForEachField(Object& object, const Where& where, const Visit& visit) {
  for (auto field_result : object) {
    od::field field;
    std::string_view key;
    if (const auto error = std::move(field_result).get(field); error != SUCCESS) return Malformed(error, where());
    if (const auto error = field.unescaped_key().get(key); error != SUCCESS) return Malformed(error, where());
    LS_RETURN_IF_ERROR(visit(key, field.value()));
  }
  return Status::Ok();
}

// The same for `value`, which must be an object.
template <typename Where, typename Visit>
Status ForEachFieldOf(od::value value, const Where& where, const Visit& visit) {
  od::object object;
  if (const auto error = value.get_object().get(object); error != SUCCESS) return Malformed(error, where());
  return ForEachField(object, where, visit);
}

// A field's string value into `out`.
Status ReadString(od::value value, std::string_view where, std::string* out) {
  std::string_view s;
  if (const auto error = value.get_string().get(s); error != SUCCESS) return Malformed(error, where);
  out->assign(s);
  return Status::Ok();
}

// An integer element of "data" into element `i` of `tensor`; false if it is not one or does
// not fit T.
template <typename T>
bool ReadInteger(od::value& v, size_t i, Tensor* tensor) {
  if constexpr (std::is_same_v<T, uint64_t>) {
    uint64_t n;
    if (v.get_uint64().get(n) != SUCCESS) return false;
    tensor->mutable_data<T>()[i] = n;
  } else {
    int64_t n;
    if (v.get_int64().get(n) != SUCCESS || !std::in_range<T>(n)) return false;
    tensor->mutable_data<T>()[i] = static_cast<T>(n);
  }
  return true;
}

// One element of "data" into element `i` of `tensor`, which has `dtype`.
Status ReadElement(od::value& v, DType dtype, size_t i, std::string_view input, Tensor* tensor) {
  auto wrong = [&](std::string_view expected) {
    return InvalidArgument("input '" + std::string(input) + "': element " + std::to_string(i) + " of 'data' is not " +
                           std::string(expected));
  };
  switch (dtype) {
    case DType::kFloat32:
    case DType::kBFloat16:
    case DType::kFloat16: {
      double d;
      if (v.get_double().get(d) != SUCCESS) return wrong("a number");
      const std::optional<float> f = JsonNumberToFloat32(d);
      if (!f) return wrong("a number within FP32's range");
      if (dtype == DType::kFloat32) {
        tensor->mutable_data<float>()[i] = *f;
      } else if (dtype == DType::kBFloat16) {
        tensor->mutable_data<bfloat16>()[i] = FloatToBfloat16(*f);
      } else {
        const float16 h = FloatToFloat16(*f);
        if (std::isinf(Float16ToFloat(h)) && !std::isinf(*f)) return wrong("a number within FP16's range");
        tensor->mutable_data<float16>()[i] = h;
      }
      return Status::Ok();
    }
    case DType::kUInt8: return ReadInteger<uint8_t>(v, i, tensor) ? Status::Ok() : wrong("a UINT8 integer");
    case DType::kInt8: return ReadInteger<int8_t>(v, i, tensor) ? Status::Ok() : wrong("an INT8 integer");
    case DType::kUInt16: return ReadInteger<uint16_t>(v, i, tensor) ? Status::Ok() : wrong("a UINT16 integer");
    case DType::kInt16: return ReadInteger<int16_t>(v, i, tensor) ? Status::Ok() : wrong("an INT16 integer");
    case DType::kUInt32: return ReadInteger<uint32_t>(v, i, tensor) ? Status::Ok() : wrong("a UINT32 integer");
    case DType::kUInt64: return ReadInteger<uint64_t>(v, i, tensor) ? Status::Ok() : wrong("a UINT64 integer");
    case DType::kFloat64: {
      double d;
      if (v.get_double().get(d) != SUCCESS) return wrong("a number");
      tensor->mutable_data<double>()[i] = d;
      return Status::Ok();
    }
    case DType::kInt32: {
      int64_t n;
      if (v.get_int64().get(n) != SUCCESS || n < INT32_MIN || n > INT32_MAX) return wrong("an INT32 integer");
      tensor->mutable_data<int32_t>()[i] = static_cast<int32_t>(n);
      return Status::Ok();
    }
    case DType::kInt64: {
      int64_t n;
      if (v.get_int64().get(n) != SUCCESS) return wrong("an INT64 integer");
      tensor->mutable_data<int64_t>()[i] = n;
      return Status::Ok();
    }
    case DType::kBool: {
      bool b;
      if (v.get_bool().get(b) != SUCCESS) return wrong("true or false");
      tensor->mutable_data<bool>()[i] = b;
      return Status::Ok();
    }
    case DType::kString: {
      std::string_view s;
      if (v.get_string().get(s) != SUCCESS) return wrong("a string");
      tensor->mutable_data<std::string>()[i].assign(s);
      return Status::Ok();
    }
    case DType::kInvalid:
      break;
  }
  return Internal("unhandled dtype");
}

// "data", flat or nested, in row-major order into `tensor` (already of its dtype and shape).
class DataReader {
 public:
  DataReader(std::string_view input, Tensor* tensor)
      : input_(input), tensor_(tensor), capacity_(static_cast<size_t>(tensor->num_elements())) {}

  Status Walk(od::value value, int depth) {
    od::json_type type;
    if (const auto error = value.type().get(type); error != SUCCESS) return Malformed(error, "'data'");
    if (type != od::json_type::array) {
      if (count_ == capacity_) return TooMany();
      LS_RETURN_IF_ERROR(ReadElement(value, tensor_->dtype(), count_, input_, tensor_));
      ++count_;
      return Status::Ok();
    }
    if (depth == Shape::kMaxRank) {
      return InvalidArgument("input '" + std::string(input_) + "': 'data' nests deeper than " +
                             std::to_string(Shape::kMaxRank) + " levels");
    }
    od::array array;
    if (const auto error = value.get_array().get(array); error != SUCCESS) return Malformed(error, "'data'");
    for (auto child : array) {
      od::value c;
      if (const auto error = child.get(c); error != SUCCESS) return Malformed(error, "'data'");
      LS_RETURN_IF_ERROR(Walk(c, depth + 1));
    }
    return Status::Ok();
  }

  Status Finish() const {
    if (count_ == capacity_) return Status::Ok();
    return InvalidArgument("input '" + std::string(input_) + "': 'data' has " + std::to_string(count_) +
                           " elements, but shape " + tensor_->shape().ToString() + " takes " +
                           std::to_string(capacity_));
  }

 private:
  Status TooMany() const {
    return InvalidArgument("input '" + std::string(input_) + "': 'data' has more elements than shape " +
                           tensor_->shape().ToString() + " takes (" + std::to_string(capacity_) + ")");
  }

  std::string_view input_;
  Tensor* tensor_;
  size_t capacity_;
  size_t count_ = 0;
};

}  // namespace

struct InferBodyReader::State {
  od::parser parser;
  std::vector<char> padded;  // the JSON, with simdjson's padding after it
  size_t json_size = 0;
  // Every element in `data` takes at least a byte of the JSON, whichever input it is in.
  int64_t json_elements_left = 0;
  od::document document;
  // "data" met before the fields it needs, parsed on its own (InputFields).
  od::parser data_parser;
  od::document data_document;
  std::string_view binary;  // the body after the JSON header
  bool has_binary = false;  // the request had an Inference-Header-Content-Length
  size_t binary_used = 0;   // of `binary`, by the inputs read so far
};

InferBodyReader::InferBodyReader() : state_(std::make_unique<State>()) {}
InferBodyReader::~InferBodyReader() = default;

void InferBodyReader::ReleaseIfLarge() {
  if (state_->padded.size() > (size_t{1} << 20) + simdjson::SIMDJSON_PADDING) state_ = std::make_unique<State>();
}

Status InferBodyReader::Start(std::string_view body, std::string_view header_length) {
  State& s = *state_;
  size_t json_size = body.size();
  s.has_binary = !header_length.empty();
  if (s.has_binary) {
    const auto [end, ec] = std::from_chars(header_length.data(), header_length.data() + header_length.size(), json_size);
    if (ec != std::errc() || end != header_length.data() + header_length.size()) {
      return InvalidArgument(std::string(kHeaderLengthHeader) + " '" + std::string(header_length) + "' is not a number");
    }
    if (json_size > body.size()) {
      return InvalidArgument(std::string(kHeaderLengthHeader) + " " + std::to_string(json_size) + " is beyond the body's " +
                             std::to_string(body.size()) + " bytes");
    }
  }
  s.binary = body.substr(json_size);
  s.binary_used = 0;
  s.json_size = json_size;
  s.json_elements_left = static_cast<int64_t>(json_size);
  if (s.padded.size() < json_size + simdjson::SIMDJSON_PADDING) s.padded.resize(json_size + simdjson::SIMDJSON_PADDING);
  std::memcpy(s.padded.data(), body.data(), json_size);
  std::memset(s.padded.data() + json_size, 0, simdjson::SIMDJSON_PADDING);
  if (const auto error = s.parser.iterate(s.padded.data(), json_size, s.padded.size()).get(s.document);
      error != SUCCESS) {
    return Malformed(error, "JSON");
  }
  return Status::Ok();
}

namespace {

// An input's fields as the body has them, before any is checked.
struct InputFields {
  std::string_view name;
  std::string_view datatype;
  bool has_name = false;
  bool has_datatype = false;
  bool has_shape = false;
  std::array<int64_t, Shape::kMaxRank + 1> dims{};  // one past the limit, for AddShapeDim's error
  int rank = 0;
  std::optional<uint64_t> binary_size;
  enum class Data { kNone, kDecoded, kDeferred } data = Data::kNone;
  std::string_view deferred_data;  // the "data" array's text, met before the fields it needs

  bool Known() const { return has_name && has_datatype && has_shape; }
  std::string Where() const { return has_name ? "input '" + std::string(name) + "'" : "an input"; }
};

// The input's entry in `request`, its datatype and its shape, once its fields are read.
Status PrepareInput(const InputFields& fields, InferRequest* request, NamedTensor** decoded, DType* dtype,
                    Shape* shape) {
  if (!fields.has_name) return InvalidArgument("malformed inference request: an input has no 'name'");
  *decoded = &request->AddInput(fields.name);
  const std::string& name = (*decoded)->name;
  if (!fields.has_datatype) return InvalidArgument("input '" + name + "' has no 'datatype'");
  LS_ASSIGN_OR_RETURN(*dtype, InputDType(name, fields.datatype));
  if (!fields.has_shape) return InvalidArgument("input '" + name + "' has no 'shape'");
  *shape = Shape();
  for (int i = 0; i < fields.rank; ++i) LS_RETURN_IF_ERROR(AddShapeDim(name, fields.dims[static_cast<size_t>(i)], shape));
  return Status::Ok();
}

// "data" (`value`, an array) into `decoded`'s tensor. Every element takes at least a byte of
// the JSON, whichever input it is in: `json_elements_left` counts what the inputs have left.
Status DecodeData(od::value value, DType dtype, const Shape& shape, NamedTensor& decoded, int64_t* json_elements_left,
                  InferRequest* request) {
  const std::string& name = decoded.name;
  od::json_type type;
  if (const auto error = value.type().get(type); error != SUCCESS) return Malformed(error, "input '" + name + "': 'data'");
  if (type != od::json_type::array) return InvalidArgument("input '" + name + "': 'data' is not an array");
  LS_RETURN_IF_ERROR(CheckShapeElements(name, shape, *json_elements_left));
  *json_elements_left -= shape.num_elements();
  LS_RETURN_IF_ERROR(TakeTensorBytes(name, dtype, shape, request));
  Tensor* tensor = &decoded.tensor;
  if (dtype == DType::kString || !tensor->Writable(dtype, shape)) *tensor = Tensor(dtype, shape);
  DataReader reader(name, tensor);
  LS_RETURN_IF_ERROR(reader.Walk(value, 0));
  return reader.Finish();
}

}  // namespace

// The fields are read in the body's order, each once: simdjson's On-Demand parser reads forward,
// and looking a field up out of order re-reads the object trusting what it read before, which a
// malformed body breaks (the v2 fuzzers' findings). "data" is decoded where it stands when the
// name, datatype and shape came before it, as clients send them; else its text is kept and
// parsed on its own once they are known.
template <typename Object>
Status InferBodyReader::ReadInput(Object& input, InferRequest* request) {
  State& s = *state_;
  InputFields fields;
  NamedTensor* decoded = nullptr;
  DType dtype = DType::kInvalid;
  Shape shape;
  const auto where = [&] { return fields.Where(); };
  LS_RETURN_IF_ERROR(ForEachField(input, where, [&](std::string_view key, od::value value) -> Status {
    if (key == "name") {
      if (const auto error = value.get_string().get(fields.name); error != SUCCESS) {
        return Malformed(error, "an input's 'name'");
      }
      fields.has_name = true;
    } else if (key == "datatype") {
      if (value.get_string().get(fields.datatype) != SUCCESS) {
        return InvalidArgument(fields.Where() + ": 'datatype' is not a string");
      }
      fields.has_datatype = true;
    } else if (key == "shape") {
      od::array dims;
      if (const auto error = value.get_array().get(dims); error != SUCCESS) {
        return Malformed(error, fields.Where() + ": 'shape'");
      }
      fields.rank = 0;
      for (auto d : dims) {
        int64_t dim;
        if (const auto error = d.get_int64().get(dim); error != SUCCESS) {
          return Malformed(error, fields.Where() + ": 'shape'");
        }
        if (fields.rank < static_cast<int>(fields.dims.size())) fields.dims[static_cast<size_t>(fields.rank++)] = dim;
      }
      fields.has_shape = true;
    } else if (key == "parameters") {
      const auto in_parameters = [&] { return fields.Where() + ": 'parameters'"; };
      return ForEachFieldOf(value, in_parameters, [&](std::string_view name, od::value parameter) -> Status {
        if (name != "binary_data_size") return Status::Ok();
        uint64_t size;
        if (const auto error = parameter.get_uint64().get(size); error != SUCCESS) {
          return Malformed(error, fields.Where() + ": 'binary_data_size'");
        }
        fields.binary_size = size;
        return Status::Ok();
      });
    } else if (key == "data") {
      if (fields.data != InputFields::Data::kNone) return InvalidArgument(fields.Where() + " has 'data' twice");
      if (fields.Known()) {
        LS_RETURN_IF_ERROR(PrepareInput(fields, request, &decoded, &dtype, &shape));
        LS_RETURN_IF_ERROR(DecodeData(value, dtype, shape, *decoded, &s.json_elements_left, request));
        fields.data = InputFields::Data::kDecoded;
      } else {
        od::array data;
        if (value.get_array().get(data) != SUCCESS) return InvalidArgument(fields.Where() + ": 'data' is not an array");
        if (const auto error = data.raw_json().get(fields.deferred_data); error != SUCCESS) {
          return Malformed(error, fields.Where() + ": 'data'");
        }
        fields.data = InputFields::Data::kDeferred;
      }
    }
    return Status::Ok();
  }));
  if (decoded == nullptr) LS_RETURN_IF_ERROR(PrepareInput(fields, request, &decoded, &dtype, &shape));
  const std::string& name = decoded->name;
  if (fields.binary_size) {
    const uint64_t binary_size = *fields.binary_size;
    if (fields.data != InputFields::Data::kNone) {
      return InvalidArgument("input '" + name + "' has both 'data' and binary_data_size");
    }
    if (!s.has_binary) {
      return InvalidArgument("input '" + name + "' has binary_data_size, but the request has no " +
                             kHeaderLengthHeader + " header");
    }
    if (binary_size > s.binary.size() - s.binary_used) {
      return InvalidArgument("input '" + name + "': binary_data_size " + std::to_string(binary_size) +
                             " runs past the body's binary data (" + std::to_string(s.binary.size() - s.binary_used) +
                             " bytes left)");
    }
    // Raw bytes are at least one per element (BYTES: four), so the shape is bounded by them.
    LS_RETURN_IF_ERROR(CheckShapeElements(name, shape, static_cast<int64_t>(binary_size)));
    LS_RETURN_IF_ERROR(TakeTensorBytes(name, dtype, shape, request));
    LS_RETURN_IF_ERROR(
        TensorFromRawContents(name, dtype, shape, s.binary.substr(s.binary_used, binary_size), &decoded->tensor));
    s.binary_used += binary_size;
    return Status::Ok();
  }
  switch (fields.data) {
    case InputFields::Data::kNone:
      return InvalidArgument("input '" + name + "' has no 'data' and no binary_data_size");
    case InputFields::Data::kDecoded:
      return Status::Ok();
    case InputFields::Data::kDeferred:
      break;
  }
  // The array's text lies in the padded copy of the body, so simdjson's padding follows it.
  const std::string_view text = fields.deferred_data;
  const size_t readable = static_cast<size_t>(s.padded.data() + s.padded.size() - text.data());
  od::value data;
  if (const auto error = s.data_parser.iterate(text.data(), text.size(), readable).get(s.data_document);
      error != SUCCESS) {
    return Malformed(error, "input '" + name + "': 'data'");
  }
  if (const auto error = s.data_document.get_value().get(data); error != SUCCESS) {
    return Malformed(error, "input '" + name + "': 'data'");
  }
  return DecodeData(data, dtype, shape, *decoded, &s.json_elements_left, request);
}

namespace {

// One element of "outputs" into `wanted`.
Status ReadOutput(od::object& output, RequestedOutput& wanted) {
  const auto in_outputs = [] { return std::string("'outputs'"); };
  bool named = false;
  LS_RETURN_IF_ERROR(ForEachField(output, in_outputs, [&](std::string_view key, od::value value) -> Status {
    if (key == "name") {
      named = true;
      return ReadString(value, "an output's 'name'", &wanted.name);
    }
    if (key != "parameters") return Status::Ok();
    const auto in_parameters = [] { return std::string("an output's 'parameters'"); };
    return ForEachFieldOf(value, in_parameters, [&](std::string_view name, od::value parameter) -> Status {
      if (name != "binary_data") return Status::Ok();
      if (const auto error = parameter.get_bool().get(wanted.binary); error != SUCCESS) {
        return Malformed(error, "an output's 'binary_data'");
      }
      wanted.binary_given = true;
      return Status::Ok();
    });
  }));
  if (!named) return InvalidArgument("malformed inference request: an output has no 'name'");
  return Status::Ok();
}

}  // namespace

Status InferBodyReader::ReadRequest(InferRequest* request) {
  State& s = *state_;
  od::object top;
  if (s.document.get_object().get(top) != SUCCESS) {
    return InvalidArgument("malformed inference request: the body is not a JSON object");
  }
  bool has_inputs = false;
  const auto in_body = [] { return std::string("JSON"); };
  LS_RETURN_IF_ERROR(ForEachField(top, in_body, [&](std::string_view key, od::value value) -> Status {
    if (key == "id") return ReadString(value, "'id'", &request->id);
    if (key == "inputs") {
      has_inputs = true;
      od::array inputs;
      if (const auto error = value.get_array().get(inputs); error != SUCCESS) return Malformed(error, "'inputs'");
      for (auto i : inputs) {
        od::object input;
        if (const auto error = i.get_object().get(input); error != SUCCESS) return Malformed(error, "'inputs'");
        LS_RETURN_IF_ERROR(ReadInput(input, request));
      }
    } else if (key == "parameters") {
      const auto in_parameters = [] { return std::string("'parameters'"); };
      return ForEachFieldOf(value, in_parameters, [&](std::string_view name, od::value parameter) -> Status {
        if (name == "signature_name") {
          return ReadString(parameter, "parameter 'signature_name'", &request->signature_name);
        }
        if (name == "binary_data_output") {
          if (const auto error = parameter.get_bool().get(request->binary_data_output); error != SUCCESS) {
            return Malformed(error, "parameter 'binary_data_output'");
          }
        }
        return Status::Ok();
      });
    } else if (key == "outputs") {
      od::array outputs;
      if (const auto error = value.get_array().get(outputs); error != SUCCESS) return Malformed(error, "'outputs'");
      for (auto o : outputs) {
        od::object output;
        if (const auto error = o.get_object().get(output); error != SUCCESS) return Malformed(error, "'outputs'");
        LS_RETURN_IF_ERROR(ReadOutput(output, request->AddOutput()));
      }
    }
    return Status::Ok();
  }));
  // Nothing may follow the object. (simdjson 3.0.1 has no document::at_end().)
  const char* end;
  if (s.document.current_location().get(end) != simdjson::OUT_OF_BOUNDS) {
    return InvalidArgument("malformed inference request: text after the JSON object");
  }
  if (!has_inputs) return InvalidArgument("malformed inference request: no 'inputs'");
  if (s.binary_used != s.binary.size()) {
    return InvalidArgument("the request's binary data has " + std::to_string(s.binary.size() - s.binary_used) +
                           " bytes that no input's binary_data_size covers");
  }
  for (size_t i = 0; i < request->num_outputs; ++i) {
    RequestedOutput& wanted = request->outputs[i];
    if (!wanted.binary_given) wanted.binary = request->binary_data_output;
  }
  return Status::Ok();
}

void AppendJsonString(std::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  *out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      *out += '\\';
      *out += c;
    } else if (u < 0x20) {
      *out += "\\u00";
      *out += kHex[u >> 4];
      *out += kHex[u & 15];
    } else {
      *out += c;
    }
  }
  *out += '"';
}

size_t WriteInferResponse(std::string_view model, int64_t version, std::string_view id,
                          std::span<const AnsweredOutput> outputs, std::string* out) {
  out->clear();
  *out += R"({"model_name":)";
  AppendJsonString(model, out);
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), version);
  *out += R"(,"model_version":")";
  out->append(digits, end);
  *out += '"';
  if (!id.empty()) {
    *out += R"(,"id":)";
    AppendJsonString(id, out);
  }
  *out += R"(,"outputs":[)";
  bool any_binary = false;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& tensor = outputs[i].output->tensor;
    if (i > 0) *out += ',';
    *out += R"({"name":)";
    AppendJsonString(outputs[i].output->name, out);
    *out += R"(,"datatype":")";
    *out += DatatypeName(tensor.dtype());
    *out += R"(","shape":[)";
    for (int d = 0; d < tensor.shape().rank(); ++d) {
      if (d > 0) *out += ',';
      const auto [dim_end, dim_ec] = std::to_chars(digits, digits + sizeof(digits), tensor.shape().dim(d));
      out->append(digits, dim_end);
    }
    *out += ']';
    if (outputs[i].binary) {
      any_binary = true;
      const auto [size_end, size_ec] = std::to_chars(digits, digits + sizeof(digits), RawByteSize(tensor));
      *out += R"(,"parameters":{"binary_data_size":)";
      out->append(digits, size_end);
      *out += "}}";
      continue;
    }
    *out += R"(,"data":)";
    // Flat: the protocol's answers are row-major lists whatever the rank.
    AppendTensorJson(tensor.shape().rank() == 1 ? tensor : tensor.Reshaped(Shape{tensor.num_elements()}), out);
    *out += '}';
  }
  *out += "]}";
  if (!any_binary) return 0;
  const size_t header_length = out->size();
  for (const AnsweredOutput& output : outputs) {
    if (output.binary) AppendRawContents(output.output->tensor, out);
  }
  return header_length;
}

}  // namespace lockstep::open_inference
