#include "runtime/model_dir.h"

#include "runtime/bundle/bundle.h"
#include "runtime/onnx/onnx_model.h"
#include "runtime/saved_model/saved_model.h"

namespace lockstep {

ModelFormat DetectModelFormat(const std::filesystem::path& dir) {
  if (IsSavedModelDir(dir)) return ModelFormat::kSavedModel;
  if (IsOnnxModelDir(dir)) return ModelFormat::kOnnx;
  return ModelFormat::kBundle;
}

std::string_view ModelFormatName(ModelFormat format) {
  switch (format) {
    case ModelFormat::kSavedModel: return "TensorFlow SavedModel";
    case ModelFormat::kOnnx: return "ONNX model";
    case ModelFormat::kBundle: break;
  }
  return "bundle";
}

StatusOr<Model> ReadModelDir(const std::filesystem::path& dir) {
  switch (DetectModelFormat(dir)) {
    case ModelFormat::kSavedModel: return ReadSavedModel(dir);
    case ModelFormat::kOnnx: return ReadOnnxModel(dir);
    case ModelFormat::kBundle: break;
  }
  return ReadBundle(dir);
}

}  // namespace lockstep
