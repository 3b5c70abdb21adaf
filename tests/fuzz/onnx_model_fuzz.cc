// ONNX model (fuzz_targets.h): a model.onnx from anywhere, as the model store reads it before
// serving it, with an external data file beside it; also each byte string as one TensorProto.
#include <string_view>

#include "runtime/onnx/onnx_model.h"
#include "runtime/onnx/onnx_tensor.h"
#include "runtime/session.h"
#include "tests/fuzz/fuzz_files.h"
#include "tests/fuzz/fuzz_targets.h"

namespace lockstep::fuzz {

void OnnxModel(Bytes data) {
  const std::string_view input(reinterpret_cast<const char*>(data.data()), data.size());
  const std::filesystem::path dir = FuzzScratchDir() / "onnx_model";
  std::filesystem::create_directories(dir);
  // The model, and the same bytes as an external data file it may name ("weights.bin").
  if (!WriteBytes(dir / kOnnxModelFile, input) || !WriteBytes(dir / "weights.bin", input)) return;
  StatusOr<Model> model = ReadOnnxModel(dir);
  if (model.ok()) {
    // What the importer accepts, the model store goes on to compile; that must not fail badly.
    SessionOptions options;
    options.max_bytes_per_run = size_t{64} << 20;
    (void)Session::Create(std::move(model).value(), options);
  }
  onnx::TensorProto tensor;
  if (tensor.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
    OnnxExternalData external(dir);
    StatusOr<Tensor> t = TensorFromOnnx(tensor, &external, int64_t{64} << 20);
    if (t.ok()) LOCKSTEP_FUZZ_CHECK(t->dtype() == DType::kString || t->byte_size() <= (size_t{64} << 20));
  }
}

}  // namespace lockstep::fuzz
