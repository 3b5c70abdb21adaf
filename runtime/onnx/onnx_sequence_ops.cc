// ONNX's sequence ops, resolved while the model loads: a sequence is the list of tensor
// values it holds (OnnxGraphSink::MakeSequence), so inserting, erasing, picking and counting
// change the list, and only what reads a tensor out of it (SequenceAt, ConcatFromSequence)
// becomes nodes. This takes every position as a constant and every length as known when the
// model loads; a sequence that grows at run time (in a Loop, or a graph input) is refused.
#include <algorithm>
#include <string>
#include <vector>

#include "runtime/onnx/onnx_translators.h"

namespace lockstep::onnx_import {
namespace {

StatusOr<const std::vector<std::string>*> InputSequence(const OnnxNodeContext& ctx, size_t i) {
  const std::vector<std::string>* seq = ctx.HasInput(i) ? ctx.sink().SequenceOf(ctx.input(i)) : nullptr;
  if (seq == nullptr) return ctx.Error("input " + std::to_string(i) + " is not a sequence");
  return seq;
}

// The constant position of input `i` in a sequence of `n`, negative counting from the end;
// `past_end`: n itself is a position (an insertion at the back).
StatusOr<size_t> Position(const OnnxNodeContext& ctx, size_t i, size_t n, bool past_end) {
  LS_ASSIGN_OR_RETURN(std::vector<int64_t> values, ctx.ConstantInts(i, "position"));
  if (values.size() != 1) return ctx.Error("position must be one value");
  const auto count = static_cast<int64_t>(n);
  int64_t at = values[0] < 0 ? values[0] + count : values[0];
  if (at < 0 || at > count || (at == count && !past_end)) {
    return ctx.Error("position " + std::to_string(values[0]) + " is outside a sequence of " + std::to_string(n));
  }
  return static_cast<size_t>(at);
}

}  // namespace

Status SequenceEmpty(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  outputs->push_back(ctx.sink().MakeSequence({}));
  return Status::Ok();
}

Status SequenceConstruct(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  std::vector<std::string> elements;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) elements.push_back(ctx.input(i));
  outputs->push_back(ctx.sink().MakeSequence(std::move(elements)));
  return Status::Ok();
}

Status SequenceInsert(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(const std::vector<std::string>* seq, InputSequence(ctx, 0));
  std::vector<std::string> elements = *seq;
  size_t at = elements.size();
  if (ctx.HasInput(2)) {
    LS_ASSIGN_OR_RETURN(at, Position(ctx, 2, elements.size(), true));
  }
  elements.insert(elements.begin() + static_cast<std::ptrdiff_t>(at), ctx.input(1));
  outputs->push_back(ctx.sink().MakeSequence(std::move(elements)));
  return Status::Ok();
}

Status SequenceErase(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(const std::vector<std::string>* seq, InputSequence(ctx, 0));
  std::vector<std::string> elements = *seq;
  if (elements.empty()) return ctx.Error("erases from an empty sequence");
  size_t at = elements.size() - 1;
  if (ctx.HasInput(1)) {
    LS_ASSIGN_OR_RETURN(at, Position(ctx, 1, elements.size(), false));
  }
  elements.erase(elements.begin() + static_cast<std::ptrdiff_t>(at));
  outputs->push_back(ctx.sink().MakeSequence(std::move(elements)));
  return Status::Ok();
}

Status SequenceAt(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(const std::vector<std::string>* seq, InputSequence(ctx, 0));
  LS_ASSIGN_OR_RETURN(size_t at, Position(ctx, 1, seq->size(), false));
  // A node of its own, so that a graph output picked from a sequence has one.
  outputs->push_back(ctx.Emit("Identity", {(*seq)[at]}));
  return Status::Ok();
}

Status SequenceLength(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(const std::vector<std::string>* seq, InputSequence(ctx, 0));
  outputs->push_back(ctx.EmitConstant(Tensor::Scalar<int64_t>(static_cast<int64_t>(seq->size()))));
  return Status::Ok();
}

Status SplitToSequence(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", 0));
  LS_ASSIGN_OR_RETURN(int64_t keepdims, ctx.IntAttr("keepdims", 1));
  LS_ASSIGN_OR_RETURN(int rank, ctx.InputRank(0));
  if (axis < -rank || axis >= rank) return ctx.Error("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  const int64_t dim = ctx.InputSpec(0)->shape.dim(static_cast<int>(axis));
  std::vector<std::string> elements;
  if (ctx.HasInput(1) && ctx.ConstantInput(1) == nullptr) {
    // Sizes known at run time: as many parts as they are long.
    const auto& split = ctx.InputSpec(1);
    if (!split || split->shape.rank() != 1 || split->shape.dim(0) < 0) {
      return ctx.Unsupported("a split whose number of parts is known only at run time");
    }
    elements = SplitByRunTimeSizes(ctx, ctx.input(0), ctx.input(1), axis, split->shape.dim(0));
  } else {
    if (dim < 0) return ctx.UnknownUntilRunTime("splitting a dimension unknown until run time into a sequence");
    // Every part is a few nodes: a model may not ask for millions of them.
    constexpr int64_t kMaxParts = int64_t{1} << 16;
    std::vector<int64_t> sizes;
    if (!ctx.HasInput(1)) {
      if (dim > kMaxParts) return ctx.Unsupported("a sequence of more than 2^16 parts");
      sizes.assign(static_cast<size_t>(dim), 1);
    } else {
      LS_ASSIGN_OR_RETURN(sizes, ctx.ConstantInts(1, "split"));
      if (ctx.ConstantInput(1)->shape().rank() == 0) {
        const int64_t chunk = sizes[0];
        if (chunk <= 0) return ctx.Error("split " + std::to_string(chunk) + " is not positive");
        if (dim / chunk > kMaxParts) return ctx.Unsupported("a sequence of more than 2^16 parts");
        sizes.clear();
        for (int64_t done = 0; done < dim; done += chunk) sizes.push_back(std::min(chunk, dim - done));
      }
      if (static_cast<int64_t>(sizes.size()) > kMaxParts) return ctx.Unsupported("a sequence of more than 2^16 parts");
      int64_t total = 0;
      for (int64_t n : sizes) {
        if (n < 0 || n > dim || total > dim) return ctx.Error("split sizes must not be negative nor exceed " + std::to_string(dim));
        total += n;
      }
      if (total != dim) return ctx.Error("split sizes add to " + std::to_string(total) + ", not " + std::to_string(dim));
    }
    elements = SplitBySizes(ctx, ctx.input(0), axis, sizes);
    if (!ctx.HasInput(1) && keepdims == 0) {
      for (size_t k = 0; k < elements.size(); ++k) {
        elements[k] = ctx.Emit("Squeeze", {elements[k]}, AttrMap{{"axes", std::vector<int64_t>{axis}}},
                               "squeezed_" + std::to_string(k));
      }
    }
  }
  outputs->push_back(ctx.sink().MakeSequence(std::move(elements)));
  return Status::Ok();
}

Status ConcatFromSequence(OnnxNodeContext& ctx, std::vector<std::string>* outputs) {
  LS_ASSIGN_OR_RETURN(const std::vector<std::string>* seq, InputSequence(ctx, 0));
  LS_ASSIGN_OR_RETURN(int64_t axis, ctx.IntAttr("axis", 0));
  LS_ASSIGN_OR_RETURN(int64_t new_axis, ctx.IntAttr("new_axis", 0));
  if (seq->empty()) return ctx.Unsupported("concatenating an empty sequence (its element shape is unknown)");
  std::vector<std::string> parts = *seq;
  if (new_axis != 0) {
    // A new axis of size 1 on each element first; a negative axis counts from the end of the
    // result, which has one more axis than an element, as ExpandDims counts it.
    for (size_t k = 0; k < parts.size(); ++k) {
      parts[k] = ctx.Emit("ExpandDims", {parts[k]}, AttrMap{{"axis", axis}}, "expanded_" + std::to_string(k));
    }
  }
  outputs->push_back(ctx.Emit("Concat", std::move(parts), AttrMap{{"axis", axis}}));
  return Status::Ok();
}

}  // namespace lockstep::onnx_import
