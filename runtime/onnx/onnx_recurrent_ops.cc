// The translators of ONNX's recurrent layers, RNN, GRU and LSTM (runtime/ops/recurrent_ops.cc):
// every optional input given (an empty tensor when the node leaves it out), and the
// activation attributes carried over (the names joined by ',').
#include "runtime/onnx/onnx_translators.h"

namespace lockstep::onnx_import {

Status Recurrent(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  const std::string& op = ctx.node().op_type();
  const size_t inputs = op == "LSTM" ? 8 : 6;
  LS_ASSIGN_OR_RETURN(DType dtype, InputDType(ctx, 0));
  std::vector<std::string> args;
  for (size_t i = 0; i < inputs; ++i) {
    if (ctx.HasInput(i)) {
      args.push_back(ctx.input(i));
    } else if (i < 3) {
      return ctx.Error("input " + std::to_string(i) + " (X, W, R) is missing");
    } else {
      args.push_back(ctx.EmitConstant(Tensor(i == 4 ? DType::kInt32 : dtype, Shape{0}), "absent_" + std::to_string(i)));
    }
  }
  AttrMap attrs;
  for (const onnx::AttributeProto& a : ctx.node().attribute()) {
    if (a.name() == "activations") {
      std::string names;
      for (const std::string& s : a.strings()) names += (names.empty() ? "" : ",") + s;
      attrs.Set("activations", names);
    } else if (a.name() == "activation_alpha" || a.name() == "activation_beta") {
      attrs.Set(a.name(), std::vector<double>(a.floats().begin(), a.floats().end()));
    } else if (a.type() == onnx::AttributeProto::INT) {
      attrs.Set(a.name(), int64_t{a.i()});
    } else if (a.type() == onnx::AttributeProto::FLOAT) {
      attrs.Set(a.name(), static_cast<double>(a.f()));
    } else if (a.type() == onnx::AttributeProto::STRING) {
      attrs.Set(a.name(), a.s());
    } else {
      return ctx.Unsupported("attribute '" + a.name() + "'");
    }
  }
  const std::string node = ctx.Emit(op, std::move(args), std::move(attrs));
  outputs->push_back(node);
  outputs->push_back(node + ":1");
  if (op == "LSTM") outputs->push_back(node + ":2");
  return Status::Ok();
}

}  // namespace lockstep::onnx_import
