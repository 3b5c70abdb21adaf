// A version directory of any kind the runtime reads: a Lockstep bundle (bundle/bundle.h), a
// TensorFlow SavedModel (saved_model/saved_model.h) or an ONNX model (onnx/onnx_model.h). The
// files decide: a saved_model.pb makes a SavedModel, a model.onnx an ONNX model, anything else
// is read as a bundle (whose reader then says what is missing).
#pragma once

#include <filesystem>
#include <string_view>

#include "runtime/graph.h"
#include "runtime/status.h"

namespace lockstep {

enum class ModelFormat { kBundle, kSavedModel, kOnnx };

ModelFormat DetectModelFormat(const std::filesystem::path& dir);
// "bundle", "TensorFlow SavedModel", "ONNX model".
std::string_view ModelFormatName(ModelFormat format);

// Reads and translates the model at `dir`, whichever its format.
StatusOr<Model> ReadModelDir(const std::filesystem::path& dir);

}  // namespace lockstep
