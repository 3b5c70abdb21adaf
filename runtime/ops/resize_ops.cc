// Resize(x, scales, sizes, roi): ONNX's Resize (and Upsample), on any number of axes.
//
// Each output coordinate of an axis maps back to a coordinate of the input (the attr
// coordinate_transformation_mode), and the output element interpolates the input elements
// around it: the nearest (attr nearest_mode), two (linear) or four (cubic, attr cubic_coeff_a)
// per resized axis, the product of those over the axes (so bilinear and bicubic in 2-D).
// Neighbours past an edge repeat the edge element, as ONNX's reference pads; exclude_outside
// drops them and renormalises the weights instead. tf_crop_and_resize reads the region `roi`
// gives and answers extrapolation_value outside it.
//
// Inputs: `scales` (float32, one per axis) or `sizes` (int64, one per axis), the other empty;
// `roi` (float32/float64, starts then ends, one per axis) empty unless tf_crop_and_resize.
// The output's size along an axis is `sizes`, or floor(in * scale) (times the region's extent
// for tf_crop_and_resize). Coordinates are computed in double from the scale as ONNX's
// reference does (a scale-given length in * scale need not be a whole number): the answers
// are the reference's, also for align_corners downsampling. Linear and cubic interpolate
// float32 and float64 (in float64 for the weights); nearest copies any dtype but strings.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/op_registry.h"
#include "runtime/ops/dtype_sets.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {
namespace {

enum class Interpolation { kNearest, kLinear, kCubic };
enum class Coordinates { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNn, kTfCropAndResize };
enum class Rounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct ResizeAttrs {
  Interpolation mode = Interpolation::kNearest;
  Coordinates coordinates = Coordinates::kHalfPixel;
  Rounding rounding = Rounding::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
};

template <typename E>
StatusOr<E> ReadChoice(const AttrMap& attrs, std::string_view name, std::string_view fallback,
                       std::initializer_list<std::pair<std::string_view, E>> choices) {
  LS_ASSIGN_OR_RETURN(std::string_view value, attrs.GetStringViewOr(name, fallback));
  std::string names;
  for (const auto& [text, e] : choices) {
    if (value == text) return e;
    names += (names.empty() ? "" : ", ") + Str(text);
  }
  return InvalidArgument("Resize: attr '" + Str(name) + "' must be one of " + names + ", got '" + Str(value) + "'");
}

StatusOr<ResizeAttrs> ReadResizeAttrs(const AttrMap& attrs) {
  ResizeAttrs r;
  LS_ASSIGN_OR_RETURN(r.mode, ReadChoice<Interpolation>(attrs, "mode", "nearest",
                                                        {{"nearest", Interpolation::kNearest},
                                                         {"linear", Interpolation::kLinear},
                                                         {"cubic", Interpolation::kCubic}}));
  LS_ASSIGN_OR_RETURN(r.coordinates,
                      ReadChoice<Coordinates>(attrs, "coordinate_transformation_mode", "half_pixel",
                                              {{"half_pixel", Coordinates::kHalfPixel},
                                               {"pytorch_half_pixel", Coordinates::kPytorchHalfPixel},
                                               {"align_corners", Coordinates::kAlignCorners},
                                               {"asymmetric", Coordinates::kAsymmetric},
                                               {"tf_half_pixel_for_nn", Coordinates::kTfHalfPixelForNn},
                                               {"tf_crop_and_resize", Coordinates::kTfCropAndResize}}));
  LS_ASSIGN_OR_RETURN(r.rounding, ReadChoice<Rounding>(attrs, "nearest_mode", "round_prefer_floor",
                                                       {{"round_prefer_floor", Rounding::kRoundPreferFloor},
                                                        {"round_prefer_ceil", Rounding::kRoundPreferCeil},
                                                        {"floor", Rounding::kFloor},
                                                        {"ceil", Rounding::kCeil}}));
  LS_ASSIGN_OR_RETURN(r.cubic_a, attrs.GetFloatOr("cubic_coeff_a", -0.75));
  LS_ASSIGN_OR_RETURN(r.exclude_outside, attrs.GetBoolOr("exclude_outside", false));
  LS_ASSIGN_OR_RETURN(r.extrapolation, attrs.GetFloatOr("extrapolation_value", 0.0));
  return r;
}

// What one axis does: its lengths, scale and region.
struct AxisPlan {
  int64_t in = 0, out = 0;
  double scale = 1.0;
  double resized_length = 0;  // in * scale, as the coordinate formulas read it
  double roi_start = 0.0, roi_end = 1.0;
  bool identity = false;  // every output coordinate is its input coordinate
};
using ResizePlan = std::array<AxisPlan, Shape::kMaxRank>;

// The float values of `t` (float32 or float64, rank 1) into `out`; how many.
StatusOr<int> ReadFloats(std::string_view what, const Tensor& t, std::array<double, 2 * Shape::kMaxRank>& out) {
  if (t.dtype() != DType::kFloat32 && t.dtype() != DType::kFloat64) {
    return InvalidArgument("Resize: " + Str(what) + " must be float32 or float64, got " + Str(DTypeName(t.dtype())));
  }
  if (t.shape().rank() != 1 || t.num_elements() > static_cast<int64_t>(out.size())) {
    return InvalidArgument("Resize: " + Str(what) + " must be a vector of at most " + std::to_string(out.size()) +
                           " values, got shape " + t.shape().ToString());
  }
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    out[static_cast<size_t>(i)] = t.dtype() == DType::kFloat32 ? double{t.data<float>()[static_cast<size_t>(i)]}
                                                               : t.data<double>()[static_cast<size_t>(i)];
  }
  return static_cast<int>(t.num_elements());
}

// The plan of every axis of an input of shape `in` (dimensions may be -1 at inference, which
// give -1 lengths) from the values of scales, sizes and roi; a null tensor is unknown.
StatusOr<ResizePlan> PlanResize(const Shape& in, const ResizeAttrs& a, const Tensor* scales, const Tensor* sizes,
                                const Tensor* roi) {
  const int rank = in.rank();
  ResizePlan plan;
  std::array<double, 2 * Shape::kMaxRank> roi_values{};
  if (a.coordinates == Coordinates::kTfCropAndResize && roi != nullptr) {
    LS_ASSIGN_OR_RETURN(int n, ReadFloats("roi", *roi, roi_values));
    if (n != 2 * rank) {
      return InvalidArgument("Resize: roi has " + std::to_string(n) + " values for an input of rank " +
                             std::to_string(rank) + " (a start and an end per axis)");
    }
  }
  IntList size_values;
  if (sizes != nullptr && sizes->num_elements() > 0) {
    LS_ASSIGN_OR_RETURN(size_values, ReadIntList("Resize", "sizes", *sizes, Shape::kMaxRank));
    if (size_values.size != rank) {
      return InvalidArgument("Resize: sizes has " + std::to_string(size_values.size) + " values for an input of rank " +
                             std::to_string(rank));
    }
  }
  std::array<double, 2 * Shape::kMaxRank> scale_values{};
  if (size_values.size == 0 && scales != nullptr) {
    LS_ASSIGN_OR_RETURN(int n, ReadFloats("scales", *scales, scale_values));
    if (n != rank) {
      return InvalidArgument("Resize: scales has " + std::to_string(n) + " values for an input of rank " +
                             std::to_string(rank) + " (and sizes none)");
    }
  }
  for (int d = 0; d < rank; ++d) {
    AxisPlan& p = plan[static_cast<size_t>(d)];
    p.in = in.dim(d);
    if (a.coordinates == Coordinates::kTfCropAndResize && roi != nullptr) {
      p.roi_start = roi_values[static_cast<size_t>(d)];
      p.roi_end = roi_values[static_cast<size_t>(d + rank)];
    }
    if (size_values.size > 0) {
      p.out = size_values[d];
      if (p.out < 0) return InvalidArgument("Resize: sizes " + IntsString(size_values.span()) + " has a negative size");
      p.scale = p.in > 0 ? static_cast<double>(p.out) / static_cast<double>(p.in) : 1.0;
      p.resized_length = static_cast<double>(p.out);
    } else if (scales != nullptr) {
      p.scale = scale_values[static_cast<size_t>(d)];
      if (!(p.scale > 0) || !std::isfinite(p.scale)) {
        return InvalidArgument("Resize: scale " + std::to_string(p.scale) + " of axis " + std::to_string(d) +
                               " is not a positive number");
      }
      const double extent = a.coordinates == Coordinates::kTfCropAndResize ? p.roi_end - p.roi_start : 1.0;
      const double length = static_cast<double>(p.in) * extent * p.scale;
      if (!(length < static_cast<double>(Shape::kMaxElements))) {
        return InvalidArgument("Resize: scale " + std::to_string(p.scale) + " makes axis " + std::to_string(d) +
                               " too long");
      }
      p.resized_length = static_cast<double>(p.in) * p.scale;
      p.out = p.in < 0 ? -1 : static_cast<int64_t>(std::floor(std::max(0.0, length)));
    } else {
      p.out = -1;
    }
    p.identity = p.in == p.out && p.scale == 1.0 && a.coordinates != Coordinates::kTfCropAndResize;
  }
  return plan;
}

StatusOr<std::vector<TensorSpec>> InferResize(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Resize", ctx.inputs.size(), 4, 4));
  LS_ASSIGN_OR_RETURN(ResizeAttrs a, ReadResizeAttrs(ctx.attrs));
  const TensorSpec& x = ctx.inputs[0];
  if (a.mode == Interpolation::kNearest) {
    LS_RETURN_IF_ERROR(CheckDTypeIn("Resize", x.dtype, DTypeSet::kNonString));
  } else {
    LS_RETURN_IF_ERROR(CheckDTypeIn("Resize", x.dtype, DTypeSet::kReal));
  }
  if (x.shape.rank() == 0) return InvalidArgument("Resize: x must have rank 1 or more");
  LS_ASSIGN_OR_RETURN(int64_t n_sizes, IntVectorLength("Resize", "sizes", ctx.inputs[2]));
  // Unknown values: the rank is all there is to say.
  const bool sizes_known = ctx.value(2) != nullptr, scales_known = ctx.value(1) != nullptr;
  const bool roi_known = ctx.value(3) != nullptr || a.coordinates != Coordinates::kTfCropAndResize;
  const bool use_sizes = sizes_known ? ctx.value(2)->num_elements() > 0 : n_sizes > 0;
  if ((use_sizes && !sizes_known) || (!use_sizes && (!scales_known || !roi_known || !sizes_known))) {
    Shape out;
    for (int d = 0; d < x.shape.rank(); ++d) out.AddDim(-1);
    return Single(x.dtype, out);
  }
  LS_ASSIGN_OR_RETURN(ResizePlan plan, PlanResize(x.shape, a, ctx.value(1), ctx.value(2), ctx.value(3)));
  Shape out;
  for (int d = 0; d < x.shape.rank(); ++d) out.AddDim(plan[static_cast<size_t>(d)].out);
  return Single(x.dtype, out);
}

// The input elements one output coordinate of an axis reads, and their weights.
struct Taps {
  int count = 0;
  std::array<int64_t, 4> index{};
  std::array<double, 4> weight{};
  bool outside = false;  // tf_crop_and_resize past the input: the element is extrapolation_value
};

// Where output coordinate `x` of axis `p` falls in the input.
double SourceCoordinate(const AxisPlan& p, Coordinates mode, int64_t x) {
  const double xr = static_cast<double>(x), in = static_cast<double>(p.in);
  switch (mode) {
    case Coordinates::kHalfPixel: return (xr + 0.5) / p.scale - 0.5;
    case Coordinates::kPytorchHalfPixel: return p.resized_length > 1 ? (xr + 0.5) / p.scale - 0.5 : 0.0;
    case Coordinates::kAlignCorners: return p.resized_length == 1 ? 0.0 : xr * (in - 1) / (p.resized_length - 1);
    case Coordinates::kAsymmetric: return xr / p.scale;
    case Coordinates::kTfHalfPixelForNn: return (xr + 0.5) / p.scale;
    case Coordinates::kTfCropAndResize:
      return p.out > 1 ? p.roi_start * (in - 1) + xr * (p.roi_end - p.roi_start) * (in - 1) / static_cast<double>(p.out - 1)
                       : 0.5 * (p.roi_start + p.roi_end) * (in - 1);
  }
  return xr;
}

Taps AxisTaps(const AxisPlan& p, const ResizeAttrs& a, int64_t x) {
  Taps t;
  if (p.identity) {
    t.count = 1;
    t.index[0] = x;
    t.weight[0] = 1.0;
    return t;
  }
  const double source = SourceCoordinate(p, a.coordinates, x);
  if (a.coordinates == Coordinates::kTfCropAndResize && (source < 0 || source > static_cast<double>(p.in - 1))) {
    t.outside = true;
    return t;
  }
  // The neighbour at or left of the coordinate, and how far past it (in (0, 1]: a coordinate
  // on an element counts as 1 past the one before, as ONNX's reference takes it).
  const double clamped = std::clamp(source, -4.0, static_cast<double>(p.in) + 4.0);
  double base = std::floor(clamped);
  double ratio = clamped - base;
  if (ratio == 0) {
    base -= 1;
    ratio = 1;
  }
  const int64_t left = static_cast<int64_t>(base);
  switch (a.mode) {
    case Interpolation::kNearest: {
      bool right = false;
      switch (a.rounding) {
        case Rounding::kRoundPreferFloor: right = ratio > 0.5; break;
        case Rounding::kRoundPreferCeil: right = ratio >= 0.5; break;
        case Rounding::kFloor: right = ratio == 1; break;
        case Rounding::kCeil: right = true; break;
      }
      t.count = 1;
      t.index[0] = left + (right ? 1 : 0);
      t.weight[0] = 1.0;
      break;
    }
    case Interpolation::kLinear:
      t.count = 2;
      t.index = {left, left + 1, 0, 0};
      t.weight = {1 - ratio, ratio, 0, 0};
      break;
    case Interpolation::kCubic: {
      const double A = a.cubic_a, r = ratio, s = 1 - ratio;
      t.count = 4;
      t.index = {left - 1, left, left + 1, left + 2};
      t.weight = {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A, ((A + 2) * r - (A + 3)) * r * r + 1,
                  ((A + 2) * s - (A + 3)) * s * s + 1, ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A};
      break;
    }
  }
  double kept = 0;
  for (int i = 0; i < t.count; ++i) {
    const bool inside = t.index[static_cast<size_t>(i)] >= 0 && t.index[static_cast<size_t>(i)] < p.in;
    if (a.exclude_outside && !inside) t.weight[static_cast<size_t>(i)] = 0;
    kept += t.weight[static_cast<size_t>(i)];
    t.index[static_cast<size_t>(i)] = std::clamp<int64_t>(t.index[static_cast<size_t>(i)], 0, p.in - 1);
  }
  if (a.exclude_outside && kept != 0) {
    for (int i = 0; i < t.count; ++i) t.weight[static_cast<size_t>(i)] /= kept;
  }
  return t;
}

// The (offset, weight) pairs of the input elements an output element reads along the axes
// before the last: at most this many (4 taps on each of 4 cubic axes).
constexpr int kMaxOuterTaps = 256;

struct OuterTaps {
  int count = 0;
  bool outside = false;
  std::array<int64_t, kMaxOuterTaps> offset{};
  std::array<double, kMaxOuterTaps> weight{};
};

// Linear and cubic, float32 and float64.
template <typename T>
Status ResizeTyped(KernelContext& ctx, const ResizeAttrs& a, const ResizePlan& plan, const Tensor& x, Tensor& out) {
  const int rank = x.shape().rank();
  const auto strides = RowMajorStrides(x.shape());
  const AxisPlan& last = plan[static_cast<size_t>(rank - 1)];
  const int64_t width = last.out;
  const int64_t rows = out.num_elements() / width;
  int64_t outer_taps = 1;
  for (int d = 0; d + 1 < rank; ++d) {
    const AxisPlan& p = plan[static_cast<size_t>(d)];
    outer_taps *= p.identity ? 1 : a.mode == Interpolation::kCubic ? 4 : a.mode == Interpolation::kLinear ? 2 : 1;
    if (outer_taps > kMaxOuterTaps) {
      return InvalidArgument("Resize: " + Str(a.mode == Interpolation::kCubic ? "cubic" : "linear") +
                             " interpolation of more than " + std::to_string(rank - 1) + " axes is not supported");
    }
  }
  const T extrapolation = static_cast<T>(a.extrapolation);
  const T* src = x.data<T>().data();
  T* dst = out.mutable_data<T>().data();
  const int64_t last_stride = strides[static_cast<size_t>(rank - 1)];
  ctx.pool().ParallelFor(rows, std::max<int64_t>(1, kElementGrain / (4 * width)), [&](int64_t begin, int64_t end) {
    OuterTaps outer;
    for (int64_t r = begin; r < end; ++r) {
      // The output row's coordinates on the axes before the last, and their taps' product.
      outer.count = 1;
      outer.outside = false;
      outer.offset[0] = 0;
      outer.weight[0] = 1.0;
      int64_t rest = r;
      for (int d = rank - 2; d >= 0; --d) {
        const AxisPlan& p = plan[static_cast<size_t>(d)];
        const int64_t coordinate = rest % p.out;
        rest /= p.out;
        const Taps t = AxisTaps(p, a, coordinate);
        if (t.outside) {
          outer.outside = true;
          break;
        }
        const int before = outer.count;
        for (int k = t.count - 1; k >= 0; --k) {
          for (int i = 0; i < before; ++i) {
            outer.offset[static_cast<size_t>(k * before + i)] =
                outer.offset[static_cast<size_t>(i)] + t.index[static_cast<size_t>(k)] * strides[static_cast<size_t>(d)];
            outer.weight[static_cast<size_t>(k * before + i)] =
                outer.weight[static_cast<size_t>(i)] * t.weight[static_cast<size_t>(k)];
          }
        }
        outer.count = before * t.count;
      }
      T* row = dst + r * width;
      if (outer.outside) {
        std::fill(row, row + width, extrapolation);
        continue;
      }
      for (int64_t j = 0; j < width; ++j) {
        const Taps t = AxisTaps(last, a, j);
        if (t.outside) {
          row[j] = extrapolation;
          continue;
        }
        double sum = 0;
        for (int i = 0; i < outer.count; ++i) {
          const T* base = src + outer.offset[static_cast<size_t>(i)];
          double inner = 0;
          for (int k = 0; k < t.count; ++k) {
            inner += t.weight[static_cast<size_t>(k)] * static_cast<double>(base[t.index[static_cast<size_t>(k)] * last_stride]);
          }
          sum += outer.weight[static_cast<size_t>(i)] * inner;
        }
        row[j] = static_cast<T>(sum);
      }
    }
  });
  return Status::Ok();
}

// Nearest: one tap on every axis, so a copy of the element's bits, for any dtype but strings.
template <typename U>
void ResizeNearest(KernelContext& ctx, const ResizeAttrs& a, const ResizePlan& plan, const Tensor& x, Tensor& out) {
  const int rank = x.shape().rank();
  const auto strides = RowMajorStrides(x.shape());
  const AxisPlan& last = plan[static_cast<size_t>(rank - 1)];
  const int64_t width = last.out;
  const U extrapolation = ElementBits<U>(x.dtype(), a.extrapolation);
  const U* src = CopyData<U>(x);
  U* dst = MutableCopyData<U>(out);
  ctx.pool().ParallelFor(out.num_elements() / width, std::max<int64_t>(1, kElementGrain / width), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t rest = r, offset = 0;
      bool outside = false;
      for (int d = rank - 2; d >= 0; --d) {
        const AxisPlan& p = plan[static_cast<size_t>(d)];
        const Taps t = AxisTaps(p, a, rest % p.out);
        outside = outside || t.outside;
        offset += t.index[0] * strides[static_cast<size_t>(d)];
        rest /= p.out;
      }
      U* row = dst + r * width;
      for (int64_t j = 0; j < width; ++j) {
        const Taps t = outside ? Taps{} : AxisTaps(last, a, j);
        row[j] = outside || t.outside ? extrapolation : src[offset + t.index[0]];
      }
    }
  });
}

Status ResizeKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_ASSIGN_OR_RETURN(ResizeAttrs a, ReadResizeAttrs(ctx.attrs()));
  if (x.shape().rank() == 0) return InvalidArgument("Resize: x must have rank 1 or more");
  LS_RETURN_IF_ERROR(CheckDTypeIn("Resize", x.dtype(), a.mode == Interpolation::kNearest ? DTypeSet::kNonString
                                                                                          : DTypeSet::kReal));
  LS_ASSIGN_OR_RETURN(ResizePlan plan, PlanResize(x.shape(), a, &ctx.input(1), &ctx.input(2), &ctx.input(3)));
  Shape out_shape;
  for (int d = 0; d < x.shape().rank(); ++d) out_shape.AddDim(plan[static_cast<size_t>(d)].out);
  LS_ASSIGN_OR_RETURN(int64_t elements, out_shape.CheckedNumElements());
  if (elements > 0 && x.num_elements() == 0) {
    return InvalidArgument("Resize: an empty input cannot give " + out_shape.ToString());
  }
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), out_shape));
  if (elements == 0) return Status::Ok();
  if (a.mode == Interpolation::kNearest) {
    return DispatchCopyType("Resize", x.dtype(), [&](auto zero) -> Status {
      using U = decltype(zero);
      if constexpr (!std::is_same_v<U, std::string>) ResizeNearest<U>(ctx, a, plan, x, *out);
      return Status::Ok();
    });
  }
  if (x.dtype() == DType::kFloat64) return ResizeTyped<double>(ctx, a, plan, x, *out);
  return ResizeTyped<float>(ctx, a, plan, x, *out);
}

}  // namespace

void RegisterResizeOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef("Resize", 4, InferResize, ResizeKernel));
}

}  // namespace lockstep
