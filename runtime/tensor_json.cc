#include "runtime/tensor_json.h"

#include <cmath>
#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "runtime/base64.h"

namespace lockstep {

void AppendFloat(float value, std::string* out) {
  if (std::isnan(value)) {
    *out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    *out += value > 0 ? "Infinity" : "-Infinity";
    return;
  }
  // %g (six significant digits) as TensorFlow Serving prints, with more digits only when
  // needed for the text to read back as the same float; nine always suffice.
  char buf[32];
  char* end = buf;
  for (int precision = 6; precision <= 9; ++precision) {
    end = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::general, precision).ptr;
    float back = 0;
    std::from_chars(buf, end, back);
    if (back == value) break;
  }
  out->append(buf, end);
  if (std::string_view(buf, static_cast<size_t>(end - buf)).find_first_of(".e") == std::string_view::npos) {
    *out += ".0";
  }
}

std::string FormatFloat(float value) {
  std::string s;
  AppendFloat(value, &s);
  return s;
}

namespace {

// Standard JSON has no NaN or Infinity; TensorFlow Serving reads and writes them as bare
// tokens. ParseJson rewrites the tokens to these doubles, which lie beyond float's range, so
// no float a client means can collide with them (a client sending one of these very numbers
// would have got an out-of-range error anyway; in a float64 tensor these two exact values read
// as NaN and infinity).
constexpr const char* kJsonNaNSentinelText = "1.25e308";  // kJsonNaNSentinel's text
constexpr const char* kJsonInfinitySentinelText = "1.5e308";

// The shortest text that reads back as `d`: a JSON number as the client wrote it, not
// std::to_string's 40 digits of %f.
std::string FormatDouble(double d) {
  char buf[32];
  char* end = std::to_chars(buf, buf + sizeof(buf), d).ptr;
  return std::string(buf, end);
}

// A float64 element: the shortest text that reads back as the same double.
void AppendDouble(double value, std::string* out) {
  if (std::isnan(value)) {
    *out += "NaN";
  } else if (std::isinf(value)) {
    *out += value > 0 ? "Infinity" : "-Infinity";
  } else {
    const std::string text = FormatDouble(value);
    *out += text;
    if (text.find_first_of(".e") == std::string::npos) *out += ".0";
  }
}

void AppendElement(const Tensor& t, int64_t i, const TensorJsonOptions& options, std::string* out) {
  switch (t.dtype()) {
    case DType::kFloat32: AppendFloat(t.data<float>()[i], out); break;
    case DType::kFloat64: AppendDouble(t.data<double>()[i], out); break;
    case DType::kBFloat16: AppendFloat(Bfloat16ToFloat(t.data<bfloat16>()[i]), out); break;
    case DType::kInt32: *out += std::to_string(t.data<int32_t>()[i]); break;
    case DType::kInt64: *out += std::to_string(t.data<int64_t>()[i]); break;
    case DType::kFloat16: AppendFloat(Float16ToFloat(t.data<float16>()[i]), out); break;
    case DType::kUInt8: *out += std::to_string(t.data<uint8_t>()[i]); break;
    case DType::kInt8: *out += std::to_string(t.data<int8_t>()[i]); break;
    case DType::kUInt16: *out += std::to_string(t.data<uint16_t>()[i]); break;
    case DType::kInt16: *out += std::to_string(t.data<int16_t>()[i]); break;
    case DType::kUInt32: *out += std::to_string(t.data<uint32_t>()[i]); break;
    case DType::kUInt64: *out += std::to_string(t.data<uint64_t>()[i]); break;
    case DType::kBool: *out += t.data<bool>()[i] ? "true" : "false"; break;
    case DType::kString:
      if (options.strings_as_b64) {
        *out += "{\"b64\": \"";
        *out += Base64Encode(t.data<std::string>()[i]);
        *out += "\"}";
      } else {
        *out += nlohmann::json(t.data<std::string>()[i]).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
      break;
    case DType::kInvalid: *out += "null"; break;
  }
}

void AppendLevel(const Tensor& t, int dim, int64_t& next, const TensorJsonOptions& options, std::string* out) {
  if (dim == t.shape().rank()) {
    AppendElement(t, next++, options, out);
    return;
  }
  *out += "[";
  for (int64_t i = 0; i < t.shape()[dim]; ++i) {
    if (i) *out += ", ";
    AppendLevel(t, dim + 1, next, options, out);
  }
  *out += "]";
}

Status InferShape(const nlohmann::json& v, Shape* shape) {
  const nlohmann::json* level = &v;
  while (level->is_array()) {
    if (!shape->AddDim(static_cast<int64_t>(level->size()))) {
      return InvalidArgument("JSON value nests deeper than " + std::to_string(Shape::kMaxRank) + " levels");
    }
    if (level->empty()) break;
    level = &(*level)[0];
  }
  return Status::Ok();
}

template <typename T>
Status ToNumber(const nlohmann::json& v, T* out) {
  if (!v.is_number()) return InvalidArgument(std::string("expected a number, got a ") + v.type_name());
  if constexpr (std::is_integral_v<T>) {
    if (v.is_number_float()) return InvalidArgument("expected an integer, got " + std::to_string(v.get<double>()));
    if (v.is_number_unsigned()) {
      auto u = v.get<uint64_t>();
      if (std::cmp_greater(u, std::numeric_limits<T>::max())) {
        return InvalidArgument(std::to_string(u) + " is out of range for " + std::string(DTypeName(DTypeOf<T>::value)));
      }
      *out = static_cast<T>(u);
    } else {
      auto s = v.get<int64_t>();
      if (!std::in_range<T>(s)) {
        return InvalidArgument(std::to_string(s) + " is out of range for " + std::string(DTypeName(DTypeOf<T>::value)));
      }
      *out = static_cast<T>(s);
    }
  } else {
    const double d = v.get<double>();
    if (d == kJsonNaNSentinel) {
      *out = static_cast<T>(std::numeric_limits<float>::quiet_NaN());
      return Status::Ok();
    }
    if (std::fabs(d) == kJsonInfinitySentinel) {
      *out = static_cast<T>(d > 0 ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity());
      return Status::Ok();
    }
    if constexpr (std::is_same_v<T, float>) {
      const std::optional<float> f = JsonNumberToFloat32(d);
      if (!f) return InvalidArgument("Cannot convert JSON value: " + FormatDouble(d) + " to float32: out of range");
      *out = *f;
      return Status::Ok();
    }
    *out = static_cast<T>(d);
  }
  return Status::Ok();
}

// {"b64": "..."}: TensorFlow Serving's way of sending bytes in JSON. An object with exactly
// that one key; anything else that is an object is an error.
StatusOr<std::string> DecodeB64Object(const nlohmann::json& v) {
  if (v.size() != 1 || !v.contains("b64")) {
    return InvalidArgument("JSON object: " + v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 200) +
                           " must have exactly one key \"b64\"");
  }
  const nlohmann::json& text = v["b64"];
  if (!text.is_string()) return InvalidArgument("\"b64\" must be a string");
  return Base64Decode(text.get_ref<const std::string&>());
}

Status Fill(const nlohmann::json& v, const Shape& shape, int dim, Tensor& t, int64_t& next) {
  if (dim < shape.rank()) {
    if (!v.is_array() || static_cast<int64_t>(v.size()) != shape[dim]) {
      return InvalidArgument("JSON lists are not rectangular: expected " + std::to_string(shape[dim]) +
                             " elements at depth " + std::to_string(dim));
    }
    for (const auto& child : v) LS_RETURN_IF_ERROR(Fill(child, shape, dim + 1, t, next));
    return Status::Ok();
  }
  if (v.is_array()) return InvalidArgument("JSON lists are not rectangular: unexpected nested list");
  const int64_t i = next++;
  if (v.is_object() && t.dtype() != DType::kString) {
    return InvalidArgument("JSON object: a {\"b64\": ...} value can only be used with DT_STRING, not " +
                           std::string(DTypeName(t.dtype())));
  }
  switch (t.dtype()) {
    case DType::kFloat32: return ToNumber(v, &t.mutable_data<float>()[i]);
    case DType::kFloat64: return ToNumber(v, &t.mutable_data<double>()[i]);
    case DType::kBFloat16: {
      float f;
      LS_RETURN_IF_ERROR(ToNumber(v, &f));
      const bfloat16 b = FloatToBfloat16(f);
      // As for float32: a finite number is never taken as infinity.
      if (std::isinf(Bfloat16ToFloat(b)) && !std::isinf(f)) {
        return InvalidArgument("Cannot convert JSON value: " + FormatFloat(f) + " to bfloat16: out of range");
      }
      t.mutable_data<bfloat16>()[i] = b;
      return Status::Ok();
    }
    case DType::kFloat16: {
      float f;
      LS_RETURN_IF_ERROR(ToNumber(v, &f));
      const float16 h = FloatToFloat16(f);
      if (std::isinf(Float16ToFloat(h)) && !std::isinf(f)) {
        return InvalidArgument("Cannot convert JSON value: " + FormatFloat(f) + " to float16: out of range");
      }
      t.mutable_data<float16>()[i] = h;
      return Status::Ok();
    }
    case DType::kInt32: return ToNumber(v, &t.mutable_data<int32_t>()[i]);
    case DType::kInt64: return ToNumber(v, &t.mutable_data<int64_t>()[i]);
    case DType::kUInt8: return ToNumber(v, &t.mutable_data<uint8_t>()[i]);
    case DType::kInt8: return ToNumber(v, &t.mutable_data<int8_t>()[i]);
    case DType::kUInt16: return ToNumber(v, &t.mutable_data<uint16_t>()[i]);
    case DType::kInt16: return ToNumber(v, &t.mutable_data<int16_t>()[i]);
    case DType::kUInt32: return ToNumber(v, &t.mutable_data<uint32_t>()[i]);
    case DType::kUInt64: return ToNumber(v, &t.mutable_data<uint64_t>()[i]);
    case DType::kBool:
      if (!v.is_boolean()) return InvalidArgument(std::string("expected true or false, got a ") + v.type_name());
      t.mutable_data<bool>()[i] = v.get<bool>();
      return Status::Ok();
    case DType::kString:
      if (v.is_object()) {
        LS_ASSIGN_OR_RETURN(t.mutable_data<std::string>()[i], DecodeB64Object(v));
        return Status::Ok();
      }
      if (!v.is_string()) return InvalidArgument(std::string("expected a string, got a ") + v.type_name());
      t.mutable_data<std::string>()[i] = v.get<std::string>();
      return Status::Ok();
    case DType::kInvalid: break;
  }
  return InvalidArgument("invalid dtype");
}

}  // namespace

StatusOr<nlohmann::json> ParseJson(std::string_view text, int max_depth) {
  // nlohmann's parser is iterative, but printing or walking a value recursively is not: a
  // request of a million '[' must be refused before it becomes a value. The same scan finds
  // the NaN / Infinity tokens standard JSON lacks, which are rewritten to their sentinels.
  int depth = 0;
  bool in_string = false, escaped = false;
  bool has_special_tokens = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > max_depth) return InvalidArgument("JSON nests deeper than " + std::to_string(max_depth) + " levels");
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == 'N' || c == 'I') {
      has_special_tokens = true;
    }
  }
  std::string rewritten;
  // Where each rewrite ended in `rewritten`, and how much longer than the original the text
  // was from there on: error offsets are reported in the client's text.
  std::vector<std::pair<size_t, int64_t>> growth;
  if (has_special_tokens) {
    rewritten.reserve(text.size() + 64);
    in_string = escaped = false;
    for (size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if (in_string) {
        if (escaped) escaped = false;
        else if (c == '\\') escaped = true;
        else if (c == '"') in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (text.compare(i, 3, "NaN") == 0) {
        rewritten += kJsonNaNSentinelText;
        i += 2;
        growth.emplace_back(rewritten.size(), static_cast<int64_t>(rewritten.size()) - static_cast<int64_t>(i + 1));
        continue;
      } else if (text.compare(i, 8, "Infinity") == 0) {
        rewritten += kJsonInfinitySentinelText;
        i += 7;
        growth.emplace_back(rewritten.size(), static_cast<int64_t>(rewritten.size()) - static_cast<int64_t>(i + 1));
        continue;
      }
      rewritten += c;
    }
    text = rewritten;
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // Say what is wrong and where, as TF Serving does ("... at offset: 17"), without
    // nlohmann's exception tag and line/column (a request body is usually one line).
    std::string what = e.what();
    const size_t column = what.find("column ");
    const size_t detail = column == std::string::npos ? std::string::npos : what.find(": ", column);
    if (detail != std::string::npos) what.erase(0, detail + 2);
    const size_t at = e.byte == 0 ? 0 : e.byte - 1;  // e.byte counts from 1
    int64_t offset = static_cast<int64_t>(at);
    for (auto it = growth.rbegin(); it != growth.rend(); ++it) {
      if (it->first <= at) {
        offset -= it->second;
        break;
      }
    }
    return InvalidArgument("not valid JSON: " + what + " at offset: " + std::to_string(offset));
  } catch (const nlohmann::json::exception& e) {
    // A number past double's range ("1e400") is out_of_range, not a parse_error, and must not
    // escape: it once ended the server (found by the rest_request fuzzer).
    std::string what = e.what();
    if (const size_t tag_end = what.find("] "); what.starts_with("[json.exception.") && tag_end != std::string::npos) {
      what.erase(0, tag_end + 2);
    }
    return InvalidArgument("not valid JSON: " + what);
  }
}

void AppendTensorJson(const Tensor& tensor, std::string* out, const TensorJsonOptions& options) {
  int64_t next = 0;
  AppendLevel(tensor, 0, next, options, out);
}

void AppendTensorRowJson(const Tensor& tensor, int64_t row, std::string* out, const TensorJsonOptions& options) {
  const Shape& shape = tensor.shape();
  int64_t row_elements = 1;
  for (int d = 1; d < shape.rank(); ++d) row_elements *= shape[d];
  int64_t next = row * row_elements;
  AppendLevel(tensor, 1, next, options, out);
}

StatusOr<Tensor> TensorFromJson(const nlohmann::json& value, DType dtype) {
  Shape shape;
  LS_RETURN_IF_ERROR(InferShape(value, &shape));
  LS_RETURN_IF_ERROR(shape.CheckedNumElements().status());
  Tensor t(dtype, shape);
  int64_t next = 0;
  LS_RETURN_IF_ERROR(Fill(value, shape, 0, t, next));
  return t;
}

}  // namespace lockstep
