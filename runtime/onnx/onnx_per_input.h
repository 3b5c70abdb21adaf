// ONNX models whose graph is made per input (GraphPerInput, runtime/graph.h).
//
// Some exports are translatable only once their input shapes are known: TorchScript's
// `squeeze(d)` becomes an If on "dimension d is 1" whose branches differ in rank (Silero VAD),
// detectors compute ranks behind data-dependent ops. ReadOnnxModelFile gives such a model (one
// whose translation stopped for want of a rank or dimension) this form: the load checks that
// every op is one Lockstep translates and declares the signature as the graph declares it;
// each run's graph is the model translated with its inputs' shapes written in, where Shape
// folds, Ifs on dimensions take their branch and every rank is known. Where that is not
// enough (an If on an input's value whose untaken branch cannot run on these shapes, as
// Silero's on its sample rate), scalar integer inputs are pinned too, and from then on a
// graph is made per shapes and per those values.
#pragma once

#include <filesystem>
#include <memory>

#include "runtime/bundle/file_image.h"
#include "runtime/graph.h"
#include "runtime/status.h"

namespace lockstep {

// The model in `image` (model.onnx's bytes; its external data in `dir`) as a model made per
// input. Errors name the node of an op Lockstep does not translate, or the input or output
// whose type it does not read.
StatusOr<Model> OnnxModelPerInput(std::shared_ptr<const FileImage> image, const std::filesystem::path& dir);

}  // namespace lockstep
