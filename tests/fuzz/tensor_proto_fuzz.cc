// TensorProto (fuzz_targets.h). The bytes are what a gRPC client sends: a PredictRequest
// (whose inputs are TensorProtos) and, read again as a ClassificationRequest, the Input of
// tf.train.Examples that Classify and Regress turn into tensors.
#include <string>

#include "server/inference.h"
#include "runtime/saved_model/tensor_proto.h"
#include "tensorflow_serving/apis/classification.pb.h"
#include "tensorflow_serving/apis/predict.pb.h"
#include "tests/fuzz/fuzz_targets.h"

namespace lockstep::fuzz {
namespace {

// Smaller than the server's cap (kMaxRequestTensorBytes), so that a splat of a few wire bytes
// into a gigabyte does not make every such input take a second; the checks are the same.
constexpr int64_t kMaxFuzzTensorBytes = int64_t{64} << 20;

// What Classify's examples feed: one input per dtype an Example's feature lists can fill.
const Signature& ExamplesSignature() {
  static const Signature signature = [] {
    Signature s;
    s.name = "classify";
    s.method_name = "tensorflow/serving/classify";
    s.inputs = {TensorBinding{.key = "x", .tensor = "x", .dtype = DType::kFloat32, .shape = Shape{-1, 3}},
                TensorBinding{.key = "n", .tensor = "n", .dtype = DType::kInt64, .shape = Shape{-1}},
                TensorBinding{.key = "s", .tensor = "s", .dtype = DType::kString, .shape = Shape{-1}}};
    return s;
  }();
  return signature;
}

}  // namespace

void TensorProto(Bytes data) {
  tensorflow::serving::PredictRequest request;
  if (request.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
    for (const auto& [key, proto] : request.inputs()) {
      StatusOr<Tensor> tensor = TensorFromProto(proto, kMaxFuzzTensorBytes);
      if (!tensor.ok()) continue;
      LOCKSTEP_FUZZ_CHECK(static_cast<int64_t>(tensor->byte_size()) <= kMaxFuzzTensorBytes);
      // What the server answers with must decode to what it decoded.
      tensorflow::TensorProto encoded;
      if (!TensorToProto(*tensor, &encoded).ok()) continue;
      StatusOr<Tensor> again = TensorFromProto(encoded, kMaxFuzzTensorBytes);
      LOCKSTEP_FUZZ_CHECK(again.ok());
      LOCKSTEP_FUZZ_CHECK(again->BitwiseEqual(*tensor));
    }
  }

  tensorflow::serving::ClassificationRequest classify;
  if (classify.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
    StatusOr<std::vector<NamedTensor>> tensors = TensorsFromExamples(ExamplesSignature(), classify.input());
    if (tensors.ok()) LOCKSTEP_FUZZ_CHECK(tensors->size() == ExamplesSignature().inputs.size());
  }
}

}  // namespace lockstep::fuzz
