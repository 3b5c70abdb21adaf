// TensorFlow Serving's REST bodies: predict requests in the row ("instances") and columnar
// ("inputs") forms, classify/regress requests ("context", "examples"), and the responses
// ("predictions", "outputs", "results") in the shapes TF Serving writes.
//
// Row form: "instances" is a list with one entry per example. With a single input each entry
// is that input's value; otherwise (and optionally with one input) each entry is an object
// naming every input. Entries are stacked along a new 0th dimension, so they must agree in
// shape. The response is {"predictions": [...]}: the bare output for one output, else one
// object per example, which needs every output to share the 0th dimension.
// Columnar form: "inputs" is one value (single input) or an object of named values, taken as
// they are; the response is {"outputs": value} or {"outputs": {name: value, ...}}.
// Strings may be sent as {"b64": "..."}; outputs whose key ends in "_bytes" are written so.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/graph.h"
#include "runtime/session.h"
#include "runtime/status.h"
#include "tensorflow_serving/apis/classification.pb.h"
#include "tensorflow_serving/apis/input.pb.h"
#include "tensorflow_serving/apis/regression.pb.h"

namespace lockstep {

// Maximum nesting of a request body; tensors need at most Shape::kMaxRank + a few levels.
inline constexpr int kMaxRequestJsonDepth = 32;

// A parsed :predict body, before the signature is known.
struct PredictBody {
  nlohmann::json json;
  std::string signature_name;  // empty: serving_default
  bool row_format = true;      // "instances" (row) or "inputs" (columnar)
};

// Parses the body and checks its outer form: an object with exactly one of "instances" and
// "inputs", and an optional string "signature_name".
StatusOr<PredictBody> ParsePredictBody(std::string_view text);

// The tensors the body gives `signature`'s inputs, with the signature's dtypes.
StatusOr<std::vector<NamedTensor>> DecodePredictInputs(const PredictBody& body, const Signature& signature);

// Writes the response object for `outputs` in the request's form.
Status WritePredictResponse(bool row_format, std::span<const NamedTensor> outputs, std::string* out);

// A classify or regress body as an Input proto (what gRPC clients send): "examples" is a list
// of objects feature -> value or list of values (JSON integers become int64_list, other
// numbers float_list, strings and {"b64": ...} bytes_list); "context" is one such object.
// Also returns the optional "signature_name".
StatusOr<tensorflow::serving::Input> InputFromJson(std::string_view text, std::string* signature_name);

// {"results": [[[label, score], ...], ...]} and {"results": [v, ...]}: TF Serving's key is
// "results", although its documentation says "result".
void WriteClassifyResponse(const tensorflow::serving::ClassificationResult& result, std::string* out);
void WriteRegressResponse(const tensorflow::serving::RegressionResult& result, std::string* out);

// {"error": "<message>"}.
std::string ErrorJson(std::string_view message);

}  // namespace lockstep
