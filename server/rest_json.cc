#include "server/rest_json.h"

#include <cmath>
#include <limits>
#include <utility>

#include "runtime/base64.h"
#include "runtime/tensor_json.h"

namespace lockstep {

namespace tfs = tensorflow::serving;
using nlohmann::json;

namespace {

std::string Quoted(std::string_view s) {
  return json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}

// {"b64": ...} stands for one string value, not for a set of named inputs.
bool IsB64Object(const json& v) { return v.is_object() && v.size() == 1 && v.contains("b64"); }
bool IsNamedObject(const json& v) { return v.is_object() && !IsB64Object(v); }

std::string InputKeys(const Signature& signature) {
  std::string keys;
  for (const TensorBinding& b : signature.inputs) keys += (keys.empty() ? "" : ", ") + b.key;
  return keys;
}

StatusOr<Tensor> DecodeValue(const json& value, const TensorBinding& binding, std::string_view where) {
  StatusOr<Tensor> tensor = TensorFromJson(value, binding.dtype);
  if (!tensor.ok()) {
    return InvalidArgument(std::string(where) + ": input '" + binding.key + "' (" +
                           std::string(DTypeName(binding.dtype)) + "): " + tensor.status().message());
  }
  return tensor;
}

// Every key of `object` must be an input of the signature, and every input must be there.
Status CheckNamedInputs(const json& object, const Signature& signature, std::string_view where) {
  for (const auto& [key, value] : object.items()) {
    bool known = false;
    for (const TensorBinding& b : signature.inputs) known = known || b.key == key;
    if (!known) {
      return InvalidArgument(std::string(where) + ": " + Quoted(key) + " is not an input of signature '" +
                             signature.name + "' (inputs: " + InputKeys(signature) + ")");
    }
  }
  for (const TensorBinding& b : signature.inputs) {
    if (!object.contains(b.key)) {
      return InvalidArgument("Missing named input: " + b.key + " in '" + std::string(where) + "' object.");
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<NamedTensor>> DecodeRows(const json& instances, const Signature& signature) {
  if (!instances.is_array()) return InvalidArgument("Expecting 'instances' to be an list/array");
  if (instances.empty()) return InvalidArgument("'instances' is empty: send at least one instance");
  std::vector<NamedTensor> tensors;
  if (!IsNamedObject(instances[0])) {
    if (signature.inputs.size() != 1) {
      return InvalidArgument("signature '" + signature.name + "' has " + std::to_string(signature.inputs.size()) +
                             " inputs (" + InputKeys(signature) + "); each instance must be an object naming them");
    }
    LS_ASSIGN_OR_RETURN(Tensor t, DecodeValue(instances, signature.inputs[0], "instances"));
    tensors.push_back({signature.inputs[0].key, std::move(t)});
    return tensors;
  }
  for (size_t i = 0; i < instances.size(); ++i) {
    if (!IsNamedObject(instances[i])) {
      return InvalidArgument("Expecting object but got " + std::string(instances[i].type_name()) + " at item " +
                             std::to_string(i) + " of input list");
    }
    LS_RETURN_IF_ERROR(CheckNamedInputs(instances[i], signature, "instances"));
  }
  for (const TensorBinding& binding : signature.inputs) {
    json column = json::array();
    column.get_ref<json::array_t&>().reserve(instances.size());
    for (const json& instance : instances) column.push_back(instance[binding.key]);
    LS_ASSIGN_OR_RETURN(Tensor t, DecodeValue(column, binding, "instances"));
    tensors.push_back({binding.key, std::move(t)});
  }
  return tensors;
}

StatusOr<std::vector<NamedTensor>> DecodeColumns(const json& inputs, const Signature& signature) {
  std::vector<NamedTensor> tensors;
  if (!IsNamedObject(inputs)) {
    if (signature.inputs.size() != 1) {
      return InvalidArgument("signature '" + signature.name + "' has " + std::to_string(signature.inputs.size()) +
                             " inputs (" + InputKeys(signature) + "); 'inputs' must be an object naming them");
    }
    LS_ASSIGN_OR_RETURN(Tensor t, DecodeValue(inputs, signature.inputs[0], "inputs"));
    tensors.push_back({signature.inputs[0].key, std::move(t)});
    return tensors;
  }
  LS_RETURN_IF_ERROR(CheckNamedInputs(inputs, signature, "inputs"));
  for (const TensorBinding& binding : signature.inputs) {
    LS_ASSIGN_OR_RETURN(Tensor t, DecodeValue(inputs[binding.key], binding, "inputs"));
    tensors.push_back({binding.key, std::move(t)});
  }
  return tensors;
}

TensorJsonOptions OptionsFor(const NamedTensor& output) {
  TensorJsonOptions options;
  options.strings_as_b64 = output.name.ends_with("_bytes");
  return options;
}

// One feature value (a scalar or a flat list) as a tf.train.Feature.
Status FeatureFromJson(const std::string& name, const json& value, tensorflow::Feature* feature) {
  const json* items = &value;
  json single;
  if (!value.is_array()) {
    single = json::array({value});
    items = &single;
  }
  if (items->empty()) return InvalidArgument("feature '" + name + "' is an empty list; its type cannot be told");
  bool any_string = false, any_float = false, any_number = false;
  for (const json& v : *items) {
    if (v.is_string() || IsB64Object(v)) any_string = true;
    else if (v.is_number_float()) any_float = any_number = true;
    else if (v.is_number()) any_number = true;
    else return InvalidArgument("feature '" + name + "' holds a " + v.type_name() + "; features are numbers or strings");
  }
  if (any_string && any_number) return InvalidArgument("feature '" + name + "' mixes strings and numbers");
  for (const json& v : *items) {
    if (any_string) {
      if (IsB64Object(v)) {
        if (!v["b64"].is_string()) return InvalidArgument("feature '" + name + "': \"b64\" must be a string");
        LS_ASSIGN_OR_RETURN(std::string bytes, Base64Decode(v["b64"].get_ref<const std::string&>()));
        feature->mutable_bytes_list()->add_value(std::move(bytes));
      } else {
        feature->mutable_bytes_list()->add_value(v.get<std::string>());
      }
    } else if (any_float) {
      const double d = v.get<double>();
      if (std::fabs(d) > static_cast<double>(std::numeric_limits<float>::max())) {
        return InvalidArgument("feature '" + name + "': " + v.dump() + " is out of range for float");
      }
      feature->mutable_float_list()->add_value(static_cast<float>(d));
    } else {
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return InvalidArgument("feature '" + name + "': " + v.dump() + " is out of range for int64");
      }
      feature->mutable_int64_list()->add_value(v.get<int64_t>());
    }
  }
  return Status::Ok();
}

Status ExampleFromJson(const json& object, std::string_view where, tensorflow::Example* example) {
  if (!object.is_object()) {
    return InvalidArgument(std::string(where) + " must be an object of features, not a " + object.type_name());
  }
  auto* features = example->mutable_features()->mutable_feature();
  for (const auto& [key, value] : object.items()) {
    LS_RETURN_IF_ERROR(FeatureFromJson(key, value, &(*features)[key]).WithPrefix(where));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<PredictBody> ParsePredictBody(std::string_view text) {
  StatusOr<json> parsed = ParseJson(text, kMaxRequestJsonDepth);
  if (!parsed.ok()) return InvalidArgument("JSON Parse error: " + parsed.status().message());
  PredictBody body;
  body.json = std::move(parsed).value();
  if (!body.json.is_object()) return InvalidArgument("JSON Value: the request body must be a JSON object");
  const bool has_instances = body.json.contains("instances");
  const bool has_inputs = body.json.contains("inputs");
  if (!has_instances && !has_inputs) return InvalidArgument("Missing 'inputs' or 'instances' key");
  if (has_instances && has_inputs) {
    return InvalidArgument("Not formatted correctly expecting only one of 'inputs' or 'instances' keys exists");
  }
  for (const auto& [key, value] : body.json.items()) {
    if (key == "signature_name") {
      if (!value.is_string()) return InvalidArgument("'signature_name' key must be a string value.");
      body.signature_name = value.get<std::string>();
    } else if (key != "instances" && key != "inputs") {
      return InvalidArgument("unknown key " + Quoted(key) + " in request (expected signature_name and instances or inputs)");
    }
  }
  body.row_format = has_instances;
  return body;
}

StatusOr<std::vector<NamedTensor>> DecodePredictInputs(const PredictBody& body, const Signature& signature) {
  return body.row_format ? DecodeRows(body.json["instances"], signature) : DecodeColumns(body.json["inputs"], signature);
}

Status WritePredictResponse(bool row_format, std::span<const NamedTensor> outputs, std::string* out) {
  out->clear();
  if (outputs.size() == 1) {
    *out += row_format ? "{\"predictions\": " : "{\"outputs\": ";
    AppendTensorJson(outputs[0].tensor, out, OptionsFor(outputs[0]));
    *out += "}";
    return Status::Ok();
  }
  if (!row_format) {
    *out += "{\"outputs\": {";
    for (size_t i = 0; i < outputs.size(); ++i) {
      *out += (i ? ", " : "") + Quoted(outputs[i].name) + ": ";
      AppendTensorJson(outputs[i].tensor, out, OptionsFor(outputs[i]));
    }
    *out += "}}";
    return Status::Ok();
  }
  // Row form with several outputs: one object per example, so every output needs the same
  // 0th dimension.
  int64_t rows = -1;
  for (const NamedTensor& output : outputs) {
    const Shape& shape = output.tensor.shape();
    const int64_t batch = shape.rank() == 0 ? -1 : shape[0];
    if (rows < 0) rows = batch;
    if (batch < 0 || batch != rows) {
      return InvalidArgument("Tensor name: " + output.name + " has inconsistent batch size: " + std::to_string(batch) +
                             " expecting: " + std::to_string(rows));
    }
  }
  *out += "{\"predictions\": [";
  for (int64_t row = 0; row < rows; ++row) {
    *out += row ? ", {" : "{";
    for (size_t i = 0; i < outputs.size(); ++i) {
      *out += (i ? ", " : "") + Quoted(outputs[i].name) + ": ";
      AppendTensorRowJson(outputs[i].tensor, row, out, OptionsFor(outputs[i]));
    }
    *out += "}";
  }
  *out += "]}";
  return Status::Ok();
}

StatusOr<tfs::Input> InputFromJson(std::string_view text, std::string* signature_name) {
  StatusOr<json> parsed = ParseJson(text, kMaxRequestJsonDepth);
  if (!parsed.ok()) return InvalidArgument("JSON Parse error: " + parsed.status().message());
  const json& body = *parsed;
  if (!body.is_object()) return InvalidArgument("JSON Value: the request body must be a JSON object");
  signature_name->clear();
  for (const auto& [key, value] : body.items()) {
    if (key == "signature_name") {
      if (!value.is_string()) return InvalidArgument("'signature_name' key must be a string value.");
      *signature_name = value.get<std::string>();
    } else if (key != "examples" && key != "context") {
      return InvalidArgument("unknown key " + Quoted(key) + " in request (expected signature_name, context, examples)");
    }
  }
  if (!body.contains("examples")) return InvalidArgument("Missing 'examples' key");
  const json& examples = body["examples"];
  if (!examples.is_array()) return InvalidArgument("Expecting 'examples' to be an list/array");
  tfs::Input input;
  auto* list = input.mutable_example_list_with_context();
  for (size_t i = 0; i < examples.size(); ++i) {
    LS_RETURN_IF_ERROR(ExampleFromJson(examples[i], "examples[" + std::to_string(i) + "]", list->add_examples()));
  }
  if (body.contains("context")) LS_RETURN_IF_ERROR(ExampleFromJson(body["context"], "context", list->mutable_context()));
  return input;
}

void WriteClassifyResponse(const tfs::ClassificationResult& result, std::string* out) {
  out->assign("{\"results\": [");
  for (int i = 0; i < result.classifications_size(); ++i) {
    *out += i ? ", [" : "[";
    const auto& classes = result.classifications(i).classes();
    for (int c = 0; c < classes.size(); ++c) {
      *out += (c ? ", [" : "[") + Quoted(classes[c].label()) + ", " + FormatFloat(classes[c].score()) + "]";
    }
    *out += "]";
  }
  *out += "]}";
}

void WriteRegressResponse(const tfs::RegressionResult& result, std::string* out) {
  out->assign("{\"results\": [");
  for (int i = 0; i < result.regressions_size(); ++i) {
    *out += (i ? ", " : "") + FormatFloat(result.regressions(i).value());
  }
  *out += "]}";
}

std::string ErrorJson(std::string_view message) { return "{\"error\": " + Quoted(message) + "}"; }

}  // namespace lockstep
