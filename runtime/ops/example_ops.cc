// ParseExampleFeature: one dense feature of a batch of serialized tf.Examples, as a tensor.
//
//   inputs:  serialized  string [N]     the examples' bytes
//            default     dtype          the value of an example without the feature; no
//                                       elements: the feature is required
//   attrs:   key (string), dtype (float32, int64 or string: float_list, int64_list,
//            bytes_list), shape (one example's, fully defined)
//   output:  dtype [N, shape...]
//
// TensorFlow's ParseExample and ParseExampleV2 parse all dense features in one op; the
// SavedModel importer emits one of these per feature instead, so the runtime keeps one output
// per node. Each reads only its own feature's list (example_wire.h skips the others by their
// lengths) and writes straight into its output: nothing is allocated but string values.
#include <string>

#include "runtime/example_wire.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"

namespace lockstep {
namespace {

constexpr std::string_view kOp = "ParseExampleFeature";

struct FeatureAttrs {
  std::string_view key;
  DType dtype;
  Shape shape;
};

StatusOr<FeatureAttrs> ReadAttrs(const AttrMap& attrs) {
  FeatureAttrs a;
  if (!attrs.Has("key")) return InvalidArgument(Str(kOp) + ": attr 'key' is missing");
  LS_ASSIGN_OR_RETURN(a.key, attrs.GetStringViewOr("key", ""));
  LS_ASSIGN_OR_RETURN(a.dtype, attrs.GetDType("dtype"));
  LS_ASSIGN_OR_RETURN(a.shape, attrs.GetShape("shape"));
  if (a.dtype != DType::kFloat32 && a.dtype != DType::kInt64 && a.dtype != DType::kString) {
    return InvalidArgument(Str(kOp) + ": dtype " + Str(DTypeName(a.dtype)) +
                           " cannot come from a tf.Example (float32, int64 or string)");
  }
  if (!a.shape.IsFullyDefined() || a.shape.rank() >= Shape::kMaxRank) {
    return InvalidArgument(Str(kOp) + ": feature '" + Str(a.key) + "' needs a fully defined shape of rank below " +
                           std::to_string(Shape::kMaxRank) + ", got " + a.shape.ToString());
  }
  return a;
}

// [rows, feature shape...]
Shape BatchShape(int64_t rows, const Shape& feature) {
  Shape s{rows};
  for (int64_t d : feature.dims()) s.AddDim(d);
  return s;
}

StatusOr<std::vector<TensorSpec>> InferParseExampleFeature(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(kOp, ctx.inputs.size(), 2, 2));
  LS_ASSIGN_OR_RETURN(FeatureAttrs a, ReadAttrs(ctx.attrs));
  LS_RETURN_IF_ERROR(CheckDType(kOp, "serialized", ctx.inputs[0].dtype, DType::kString));
  LS_RETURN_IF_ERROR(CheckRank(kOp, "serialized", ctx.inputs[0].shape, 1));
  LS_RETURN_IF_ERROR(CheckDType(kOp, "default", ctx.inputs[1].dtype, a.dtype));
  return Single(a.dtype, BatchShape(ctx.inputs[0].shape[0], a.shape));
}

template <typename T>
Status ReadList(const ExampleFeature& f, std::span<T> out) {
  if constexpr (std::is_same_v<T, float>) return ReadExampleFloats(f, out);
  if constexpr (std::is_same_v<T, int64_t>) return ReadExampleInt64s(f, out);
  if constexpr (std::is_same_v<T, std::string>) return ReadExampleBytes(f, out);
}

template <typename T>
Status Fill(const FeatureAttrs& a, const Tensor& serialized, const Tensor& fallback, Tensor& out) {
  const int64_t per_example = a.shape.num_elements();
  const std::span<const std::string> examples = serialized.data<std::string>();
  const std::span<T> values = out.mutable_data<T>();
  for (size_t i = 0; i < examples.size(); ++i) {
    const std::span<T> row = values.subspan(i * static_cast<size_t>(per_example), static_cast<size_t>(per_example));
    auto where = [&] { return "example " + std::to_string(i) + ", feature '" + Str(a.key) + "'"; };
    StatusOr<ExampleFeature> f = FindExampleFeature(examples[i], a.key);
    if (!f.ok()) return InvalidArgument("example " + std::to_string(i) + ": " + f.status().message());
    if (f->kind == ExampleFeature::Kind::kAbsent) {
      if (fallback.num_elements() == 0) {
        return InvalidArgument(where() + " (" + Str(DTypeName(a.dtype)) + ") is required but could not be found");
      }
      const std::span<const T> d = fallback.data<T>();
      std::copy(d.begin(), d.end(), row.begin());
      continue;
    }
    Status s = ReadList<T>(*f, row);
    if (!s.ok()) return InvalidArgument(where() + " of shape " + a.shape.ToString() + ": " + s.message());
  }
  return Status::Ok();
}

Status ParseExampleFeatureKernel(KernelContext& ctx) {
  LS_ASSIGN_OR_RETURN(FeatureAttrs a, ReadAttrs(ctx.attrs()));
  const Tensor& serialized = ctx.input(0);
  const Tensor& fallback = ctx.input(1);
  LS_RETURN_IF_ERROR(CheckDType(kOp, "serialized", serialized.dtype(), DType::kString));
  LS_RETURN_IF_ERROR(CheckRank(kOp, "serialized", serialized.shape(), 1));
  LS_RETURN_IF_ERROR(CheckDType(kOp, "default", fallback.dtype(), a.dtype));
  if (fallback.num_elements() != 0 && fallback.num_elements() != a.shape.num_elements()) {
    return InvalidArgument(Str(kOp) + ": the default of feature '" + Str(a.key) + "' has " +
                           std::to_string(fallback.num_elements()) + " values; its shape " + a.shape.ToString() +
                           " needs " + std::to_string(a.shape.num_elements()));
  }
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, a.dtype, BatchShape(serialized.shape()[0], a.shape)));
  switch (a.dtype) {
    case DType::kFloat32: return Fill<float>(a, serialized, fallback, *out);
    case DType::kInt64: return Fill<int64_t>(a, serialized, fallback, *out);
    default: return Fill<std::string>(a, serialized, fallback, *out);
  }
}

}  // namespace

void RegisterExampleOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef(std::string(kOp), 2, InferParseExampleFeature, ParseExampleFeatureKernel));
}

}  // namespace lockstep
