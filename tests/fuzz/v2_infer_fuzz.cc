// V2InferJson, V2InferBinary and V2InferGrpc (fuzz_targets.h): the Open Inference Protocol's
// infer requests, decoded for signatures of every datatype the runtime has. What a request
// decodes to must come back from the answer: every decoded input is written as an output (REST
// binary, and REST JSON, which must be JSON; gRPC raw contents), and that answer, read as a
// request again, decodes to the same tensors bit for bit.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tensor_json.h"
#include "server/open_inference/infer_api.h"
#include "server/open_inference/proto_infer.h"
#include "server/open_inference/rest_infer.h"
#include "tests/fuzz/fuzz_targets.h"

namespace lockstep::fuzz {
namespace {

namespace oi = open_inference;

TensorBinding InferInput(std::string key, DType dtype, Shape shape) {
  return TensorBinding{.key = key, .tensor = key, .dtype = dtype, .shape = shape};
}

// One signature per datatype with one input "x", and one with two inputs of different kinds.
const std::vector<Signature>& InferSignatures() {
  static const std::vector<Signature> signatures = [] {
    std::vector<Signature> out;
    for (const DType dtype : {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kInt32, DType::kInt64,
                              DType::kBool, DType::kString}) {
      Signature s;
      s.name = std::string(DTypeName(dtype));
      s.inputs = {InferInput("x", dtype, Shape{-1})};
      out.push_back(std::move(s));
    }
    Signature two;
    two.name = "two";
    two.inputs = {InferInput("a", DType::kFloat32, Shape{-1, 2}), InferInput("b", DType::kString, Shape{-1})};
    out.push_back(std::move(two));
    return out;
  }();
  return signatures;
}

void ExpectSame(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
  LOCKSTEP_FUZZ_CHECK(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    LOCKSTEP_FUZZ_CHECK(a[i].name == b[i].name);
    LOCKSTEP_FUZZ_CHECK(a[i].tensor.BitwiseEqual(b[i].tensor));
  }
}

std::vector<oi::AnsweredOutput> AsOutputs(const std::vector<NamedTensor>& tensors, bool binary) {
  std::vector<oi::AnsweredOutput> outputs;
  for (const NamedTensor& t : tensors) outputs.push_back({&t, binary});
  return outputs;
}

// The request's inputs in `signature`'s order.
Status Bind(const Signature& signature, oi::InferRequest& request, std::vector<NamedTensor>* inputs) {
  std::vector<bool> bound;
  return oi::BindInputs(signature, request, inputs, &bound);
}

// Reads a REST body for `signature`; OK with the inputs decoded.
Status ReadRest(std::string_view body, std::string_view header_length, const Signature& signature,
                std::vector<NamedTensor>* inputs) {
  static oi::InferBodyReader reader;  // reused, as a connection reuses its own
  oi::InferRequest request;
  LS_RETURN_IF_ERROR(reader.Start(body, header_length));
  LS_RETURN_IF_ERROR(reader.ReadRequest(&request));
  return Bind(signature, request, inputs);
}

// The REST answer with `inputs` as its outputs: JSON (which must parse), and binary (which,
// turned into a request, must decode to `inputs` again).
void CheckRestRoundTrip(const Signature& signature, const std::vector<NamedTensor>& inputs) {
  std::string response;
  LOCKSTEP_FUZZ_CHECK(oi::WriteInferResponse("m", 1, "id", AsOutputs(inputs, false), &response) == 0);
  LOCKSTEP_FUZZ_CHECK(ParseJson(response).ok());

  const size_t header = oi::WriteInferResponse("m", 1, "id", AsOutputs(inputs, true), &response);
  LOCKSTEP_FUZZ_CHECK(header > 0 && header <= response.size());
  StatusOr<nlohmann::json> answer = ParseJson(std::string_view(response).substr(0, header));
  LOCKSTEP_FUZZ_CHECK(answer.ok());
  nlohmann::json request;
  request["inputs"] = std::move((*answer)["outputs"]);
  const std::string text = request.dump();
  const std::string body = text + response.substr(header);
  std::vector<NamedTensor> again;
  const Status read = ReadRest(body, std::to_string(text.size()), signature, &again);
  LOCKSTEP_FUZZ_CHECK(read.ok());
  ExpectSame(inputs, again);
}

void FuzzRest(std::string_view body, std::string_view header_length) {
  for (const Signature& signature : InferSignatures()) {
    std::vector<NamedTensor> inputs;
    if (ReadRest(body, header_length, signature, &inputs).ok()) CheckRestRoundTrip(signature, inputs);
  }
}

}  // namespace

void V2InferJson(Bytes data) {
  FuzzRest(std::string_view(reinterpret_cast<const char*>(data.data()), data.size()), "");
}

void V2InferBinary(Bytes data) {
  // The first line is the Inference-Header-Content-Length header's value, the rest the body.
  const std::string_view all(reinterpret_cast<const char*>(data.data()), data.size());
  const size_t newline = all.find('\n');
  if (newline == std::string_view::npos) return;
  FuzzRest(all.substr(newline + 1), all.substr(0, newline));
}

void V2InferGrpc(Bytes data) {
  inference::ModelInferRequest message;
  if (!message.ParseFromArray(data.data(), static_cast<int>(data.size()))) return;
  for (const Signature& signature : InferSignatures()) {
    oi::InferRequest request;
    if (!oi::ReadInferRequest(message, &request).ok()) return;
    std::vector<NamedTensor> inputs;
    if (!Bind(signature, request, &inputs).ok()) continue;
    // The answer, turned into a request, decodes to the same tensors.
    inference::ModelInferResponse response;
    oi::WriteInferResponse("m", 1, request.id, AsOutputs(inputs, false), &response);
    inference::ModelInferRequest again_message;
    for (const auto& output : response.outputs()) {
      auto* input = again_message.add_inputs();
      input->set_name(output.name());
      input->set_datatype(output.datatype());
      *input->mutable_shape() = output.shape();
    }
    *again_message.mutable_raw_input_contents() = response.raw_output_contents();
    oi::InferRequest again_request;
    LOCKSTEP_FUZZ_CHECK(oi::ReadInferRequest(again_message, &again_request).ok());
    std::vector<NamedTensor> again;
    LOCKSTEP_FUZZ_CHECK(Bind(signature, again_request, &again).ok());
    ExpectSame(inputs, again);
  }
}

}  // namespace lockstep::fuzz
