// RestRequest (fuzz_targets.h). The input is a REST target line, a newline, then the body.
// Every decoded predict body is written back as a response and that response read as a
// request again: what the server answers must be what it was asked, value for value. And the
// fast body reader (predict_body_reader.h) reads only bodies the DOM path reads, with the
// same tensors bit for bit.
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tensor_json.h"
#include "server/rest_api.h"
#include "server/predict_body_reader.h"
#include "server/rest_json.h"
#include "tests/fuzz/fuzz_targets.h"

namespace lockstep::fuzz {
namespace {

TensorBinding Input(std::string key, DType dtype, Shape shape) {
  return TensorBinding{.key = key, .tensor = key, .dtype = dtype, .shape = shape};
}

// One input of each form a client sends, and several of every dtype a request can hold. The
// string input's key ends in "_bytes", so the response writes it as base64 and any bytes
// survive the round trip (plain JSON strings must be UTF-8).
const std::vector<Signature>& Signatures() {
  static const std::vector<Signature> signatures = [] {
    Signature single;
    single.name = "single";
    single.method_name = "tensorflow/serving/predict";
    single.inputs = {Input("x", DType::kFloat32, Shape{-1, 3})};
    Signature several;
    several.name = "several";
    several.method_name = "tensorflow/serving/predict";
    several.inputs = {Input("a", DType::kInt64, Shape{-1}), Input("s_bytes", DType::kString, Shape{-1}),
                      Input("b", DType::kBool, Shape{-1, 2}), Input("h", DType::kBFloat16, Shape{-1}),
                      Input("i", DType::kInt32, Shape{-1, 2, 2})};
    Signature floats;  // the fast reader's dtypes, named in the columnar form
    floats.name = "floats";
    floats.method_name = "tensorflow/serving/predict";
    floats.inputs = {Input("p", DType::kFloat32, Shape{-1}), Input("q", DType::kFloat64, Shape{-1, 2})};
    return std::vector<Signature>{single, several, floats};
  }();
  return signatures;
}

// What the fast reader accepts of `body`, the DOM path (`predict`, its reading) accepts too,
// with the same form, signature name and tensors.
void CheckFastReader(std::string_view body, const StatusOr<PredictBody>& predict) {
  static PredictBodyReader reader;  // reused, as a connection reuses its own
  for (const Signature& signature : Signatures()) {
    std::vector<NamedTensor> fast;
    if (!reader.Start(body) || !reader.DecodeInputs(signature, &fast)) continue;
    LOCKSTEP_FUZZ_CHECK(predict.ok());
    LOCKSTEP_FUZZ_CHECK(reader.row_format() == predict->row_format);
    LOCKSTEP_FUZZ_CHECK(reader.signature_name() == predict->signature_name);
    StatusOr<std::vector<NamedTensor>> dom = DecodePredictInputs(*predict, signature);
    LOCKSTEP_FUZZ_CHECK(dom.ok());
    LOCKSTEP_FUZZ_CHECK(dom->size() == fast.size());
    for (size_t i = 0; i < fast.size(); ++i) {
      LOCKSTEP_FUZZ_CHECK(fast[i].name == (*dom)[i].name);
      LOCKSTEP_FUZZ_CHECK(fast[i].tensor.BitwiseEqual((*dom)[i].tensor));
    }
  }
}

// The response to a predict whose outputs are `tensors`, read back as a request in the same
// form, must decode to `tensors` again.
void CheckRoundTrip(bool row_format, const Signature& signature, const std::vector<NamedTensor>& tensors) {
  std::string response;
  if (!WritePredictResponse(row_format, tensors, &response).ok()) return;
  StatusOr<nlohmann::json> parsed = ParseJson(response, kMaxRequestJsonDepth);
  LOCKSTEP_FUZZ_CHECK(parsed.ok());
  nlohmann::json request;
  if (row_format) {
    request["instances"] = std::move((*parsed)["predictions"]);
  } else {
    request["inputs"] = std::move((*parsed)["outputs"]);
  }
  const std::string text = request.dump();
  StatusOr<PredictBody> body = ParsePredictBody(text);
  LOCKSTEP_FUZZ_CHECK(body.ok());
  CheckFastReader(text, body);
  StatusOr<std::vector<NamedTensor>> again = DecodePredictInputs(*body, signature);
  LOCKSTEP_FUZZ_CHECK(again.ok());
  LOCKSTEP_FUZZ_CHECK(again->size() == tensors.size());
  for (const NamedTensor& first : tensors) {
    bool found = false;
    for (const NamedTensor& second : *again) {
      if (second.name != first.name) continue;
      found = true;
      LOCKSTEP_FUZZ_CHECK(second.tensor.BitwiseEqual(first.tensor));
    }
    LOCKSTEP_FUZZ_CHECK(found);
  }
}

}  // namespace

void RestRequest(Bytes data) {
  const std::string_view input(reinterpret_cast<const char*>(data.data()), data.size());
  const size_t newline = input.find('\n');
  const std::string_view target = input.substr(0, newline);
  const std::string_view body =
      newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1);

  for (std::string_view method : {"GET", "POST"}) {
    StatusOr<RestPath> path = ParseRestPath(method, target);
    if (path.ok()) LOCKSTEP_FUZZ_CHECK(!path->model.empty());
  }

  StatusOr<PredictBody> predict = ParsePredictBody(body);
  CheckFastReader(body, predict);
  if (predict.ok()) {
    for (const Signature& signature : Signatures()) {
      StatusOr<std::vector<NamedTensor>> inputs = DecodePredictInputs(*predict, signature);
      if (inputs.ok()) CheckRoundTrip(predict->row_format, signature, *inputs);
    }
  }

  std::string signature_name;
  (void)InputFromJson(body, &signature_name);
}

}  // namespace lockstep::fuzz
