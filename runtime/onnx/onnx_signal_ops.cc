// The translators of ONNX's signal-processing ops (opset 17): the window functions, DFT and
// STFT (runtime/ops/signal_ops.cc).
#include "runtime/onnx/onnx_tensor.h"
#include "runtime/onnx/onnx_translators.h"

namespace lockstep::onnx_import {

// HannWindow, HammingWindow, BlackmanWindow: output_datatype (an ONNX type, float by default)
// becomes the op's dtype.
Status WindowFunction(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t type, ctx.IntAttr("output_datatype", onnx::TensorProto::FLOAT));
  StatusOr<DType> dtype = OnnxElemTypeToDType(static_cast<int32_t>(type));
  if (!dtype.ok()) return ctx.Unsupported("output_datatype " + OnnxElemTypeName(static_cast<int32_t>(type)));
  LS_ASSIGN_OR_RETURN(int64_t periodic, ctx.IntAttr("periodic", 1));
  outputs->push_back(ctx.Emit(ctx.node().op_type(), {ctx.input(0)}, AttrMap{{"dtype", ComputeDType(*dtype)}, {"periodic", periodic}}));
  return Status::Ok();
}

Status MelWeightMatrix(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t type, ctx.IntAttr("output_datatype", onnx::TensorProto::FLOAT));
  StatusOr<DType> dtype = OnnxElemTypeToDType(static_cast<int32_t>(type));
  if (!dtype.ok()) return ctx.Unsupported("output_datatype " + OnnxElemTypeName(static_cast<int32_t>(type)));
  std::vector<std::string> inputs;
  for (size_t i = 0; i < 5; ++i) inputs.push_back(ctx.input(i));
  outputs->push_back(ctx.Emit("MelWeightMatrix", std::move(inputs), AttrMap{{"dtype", ComputeDType(*dtype)}}));
  return Status::Ok();
}

Status Dft(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(AttrMap attrs, ctx.PlainAttrs());
  std::vector<std::string> inputs{ctx.input(0)};
  if (ctx.HasInput(1)) inputs.push_back(ctx.input(1));
  outputs->push_back(ctx.Emit("DFT", std::move(inputs), std::move(attrs)));
  return Status::Ok();
}

// STFT(signal, frame_step, window?, frame_length?): the absent ones as empty tensors.
Status Stft(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(AttrMap attrs, ctx.PlainAttrs());
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
  const std::string window = ctx.HasInput(2) ? ctx.input(2) : ctx.EmitConstant(Tensor(dtype, Shape{0}), "no_window");
  const std::string length =
      ctx.HasInput(3) ? ctx.input(3) : ctx.EmitConstant(Tensor(DType::kInt64, Shape{0}), "no_frame_length");
  outputs->push_back(ctx.Emit("STFT", {ctx.input(0), ctx.input(1), window, length}, std::move(attrs)));
  return Status::Ok();
}

}  // namespace lockstep::onnx_import
