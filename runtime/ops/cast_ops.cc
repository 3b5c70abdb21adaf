// Cast (attr "dtype"): every dtype to every other, strings included, and the gradient of a
// cast between floating types.
#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/autodiff/gradient_builder.h"
#include "runtime/bfloat16.h"
#include "runtime/float16.h"
#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"

namespace lockstep {
namespace {

// Conversions, chosen to be total (no undefined behaviour on any input):
//   float/bfloat16 -> int: truncation toward zero, as TensorFlow; NaN gives 0; values past the
//     integer's range (infinities included) saturate to its minimum or maximum;
//   int -> float/bfloat16: round to nearest even (int -> bfloat16 rounds through float32);
//   int64 -> int32: keeps the low 32 bits (two's complement wrap), as TensorFlow;
//   anything -> bool: true when not zero (NaN is true); bool -> number: 0 or 1;
//   float32 <-> bfloat16: bfloat16.h's rounding (nearest even, NaN kept); float64 -> float32
//   rounds to nearest (infinity beyond float's range); float64 -> bfloat16 goes through float32;
//   float16 as bfloat16 (float16.h's rounding), through float32;
//   the narrower integers (uint8 ... uint64): from floats, truncation saturating at their range
//   (NaN gives 0, negatives give 0 for the unsigned); from other integers, the low bits (wrap).
// Casting to the same dtype copies, for every dtype including string. Numbers become strings
// in their shortest form that reads back the same ("0.1", "1e-05", "nan", "inf"; booleans
// "True" and "False", as numpy writes them); strings become numbers as C++'s from_chars reads
// them (a leading '+' allowed, "NaN" and "INF" in any case; "True" and "False" for booleans),
// then as a cast of that value, and a string that is not a number fails the run naming it.

bool IsCastable(DType d) { return d != DType::kInvalid; }

StatusOr<DType> CastTarget(const AttrMap& attrs, DType from) {
  StatusOr<DType> to = attrs.GetDType("dtype");
  if (!to.ok()) return to.status().WithPrefix("Cast");
  if (*to != from && (!IsCastable(from) || !IsCastable(*to))) {
    return InvalidArgument("Cast: cannot cast " + Str(DTypeName(from)) + " to " +
                           Str(DTypeName(*to)));
  }
  return *to;
}

StatusOr<std::vector<TensorSpec>> InferCast(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("Cast", ctx.inputs.size(), 1, 1));
  LS_ASSIGN_OR_RETURN(DType to, CastTarget(ctx.attrs, ctx.inputs[0].dtype));
  return Single(to, ctx.inputs[0].shape);
}

template <typename To, typename From>
To FloatToInt(From x) {
  // max + 1, the first value that does not fit (a power of two, exact in float and double),
  // and the minimum.
  constexpr From kLimit = static_cast<From>(2) * static_cast<From>(std::numeric_limits<To>::max() / 2 + 1);
  constexpr From kLowest = static_cast<From>(std::numeric_limits<To>::min());
  if (x != x) return 0;
  if (x >= kLimit) return std::numeric_limits<To>::max();
  if (x <= kLowest) return std::numeric_limits<To>::min();
  return static_cast<To>(x);
}

template <typename To, typename From>
To CastValue(From x) {
  if constexpr (std::is_same_v<From, bfloat16>) {
    return CastValue<To>(Bfloat16ToFloat(x));
  } else if constexpr (std::is_same_v<From, float16>) {
    return CastValue<To>(Float16ToFloat(x));
  } else if constexpr (std::is_same_v<To, bfloat16>) {
    return FloatToBfloat16(CastValue<float>(x));
  } else if constexpr (std::is_same_v<To, float16>) {
    return FloatToFloat16(CastValue<float>(x));
  } else if constexpr (std::is_same_v<To, bool>) {
    return x != From{0};
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    return FloatToInt<To>(x);
  } else if constexpr (std::is_same_v<From, double> && std::is_same_v<To, float>) {
    // Beyond float's range the conversion is undefined in C++; IEEE rounding gives the largest
    // float below 2^128 - 2^103 (half an ulp above it) and infinity from there.
    constexpr double kOverflow = 0x1p128 - 0x1p103;
    if (x >= kOverflow) return std::numeric_limits<float>::infinity();
    if (x <= -kOverflow) return -std::numeric_limits<float>::infinity();
    return static_cast<float>(x);
  } else {
    return static_cast<To>(x);
  }
}

template <typename From, typename To>
void CastRange(const From* in, To* out, int64_t n) {
  if constexpr (std::is_same_v<From, float> && std::is_same_v<To, bfloat16>) {
    const size_t count = static_cast<size_t>(n);
    FloatToBfloat16(std::span<const float>(in, count), std::span<bfloat16>(out, count));
  } else if constexpr (std::is_same_v<From, bfloat16> && std::is_same_v<To, float>) {
    const size_t count = static_cast<size_t>(n);
    Bfloat16ToFloat(std::span<const bfloat16>(in, count), std::span<float>(out, count));
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = CastValue<To>(in[i]);
  }
}

template <typename From, typename To>
void CastTyped(KernelContext& ctx, const Tensor& in, Tensor& out) {
  const From* src = in.data<From>().data();
  To* dst = out.mutable_data<To>().data();
  ctx.pool().ParallelFor(in.num_elements(), kElementGrain, [&](int64_t begin, int64_t end) {
    CastRange(src + begin, dst + begin, end - begin);
  });
}

template <typename From>
std::string NumberText(From x) {
  if constexpr (std::is_same_v<From, bool>) {
    return x ? "True" : "False";
  } else if constexpr (std::is_same_v<From, bfloat16> || std::is_same_v<From, float16>) {
    return NumberText(CastValue<float>(x));
  } else {
    std::array<char, 64> buf;
    const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), x);
    return ec == std::errc() ? std::string(buf.data(), end) : std::string();
  }
}

// The number `text` holds, as From; false when it holds none (or more than one).
template <typename To>
bool ParseNumber(std::string_view text, To* out) {
  if (text.size() > 1 && text[0] == '+' && text[1] != '-' && text[1] != '+') text.remove_prefix(1);
  if constexpr (std::is_same_v<To, bool>) {
    // As numbers cast to bool, and the words NumberText writes.
    if (text == "True" || text == "true" || text == "False" || text == "false") {
      *out = text[0] == 'T' || text[0] == 't';
      return true;
    }
  }
  const char* first = text.data();
  const char* last = first + text.size();
  if constexpr (std::is_same_v<To, float> || std::is_same_v<To, double>) {
    const auto [end, ec] = std::from_chars(first, last, *out);
    return ec == std::errc() && end == last;
  } else if constexpr (std::is_integral_v<To> && !std::is_same_v<To, bool>) {
    // Whole numbers exactly; others ("2.5", "1e3") through double, then cast.
    using Wide = std::conditional_t<std::is_signed_v<To>, int64_t, uint64_t>;
    Wide wide = 0;
    if (const auto [end, ec] = std::from_chars(first, last, wide); ec == std::errc() && end == last) {
      *out = static_cast<To>(wide);
      return true;
    }
    double d = 0;
    if (!ParseNumber(text, &d)) return false;
    *out = CastValue<To>(d);
    return true;
  } else {
    float f = 0;
    if (!ParseNumber(text, &f)) return false;
    *out = CastValue<To>(f);
    return true;
  }
}

template <typename From>
void CastToText(const Tensor& in, Tensor& out) {
  auto src = in.data<From>();
  auto dst = out.mutable_data<std::string>();
  for (size_t i = 0; i < src.size(); ++i) dst[i] = NumberText(src[i]);
}

template <typename To>
Status CastText(const Tensor& in, Tensor& out) {
  auto src = in.data<std::string>();
  To* dst = out.mutable_data<To>().data();
  for (size_t i = 0; i < src.size(); ++i) {
    if (!ParseNumber(src[i], &dst[i])) {
      return InvalidArgument("Cast: '" + src[i].substr(0, 64) + "' is not a number");
    }
  }
  return Status::Ok();
}

template <typename From>
Status CastNumbers(KernelContext& ctx, const Tensor& in, Tensor& out);

template <typename From>
Status CastFrom(KernelContext& ctx, const Tensor& in, Tensor& out) {
  if constexpr (std::is_same_v<From, std::string>) {
    switch (out.dtype()) {
      case DType::kFloat32: return CastText<float>(in, out);
      case DType::kFloat64: return CastText<double>(in, out);
      case DType::kBFloat16: return CastText<bfloat16>(in, out);
      case DType::kInt32: return CastText<int32_t>(in, out);
      case DType::kInt64: return CastText<int64_t>(in, out);
      case DType::kBool: return CastText<bool>(in, out);
      case DType::kFloat16: return CastText<float16>(in, out);
      case DType::kUInt8: return CastText<uint8_t>(in, out);
      case DType::kInt8: return CastText<int8_t>(in, out);
      case DType::kUInt16: return CastText<uint16_t>(in, out);
      case DType::kInt16: return CastText<int16_t>(in, out);
      case DType::kUInt32: return CastText<uint32_t>(in, out);
      case DType::kUInt64: return CastText<uint64_t>(in, out);
      default: return Internal("Cast: unexpected target dtype");
    }
  } else {
    if (out.dtype() == DType::kString) {
      CastToText<From>(in, out);
      return Status::Ok();
    }
    return CastNumbers<From>(ctx, in, out);
  }
}

template <typename From>
Status CastNumbers(KernelContext& ctx, const Tensor& in, Tensor& out) {
  switch (out.dtype()) {
    case DType::kFloat32: CastTyped<From, float>(ctx, in, out); break;
    case DType::kFloat64: CastTyped<From, double>(ctx, in, out); break;
    case DType::kBFloat16: CastTyped<From, bfloat16>(ctx, in, out); break;
    case DType::kInt32: CastTyped<From, int32_t>(ctx, in, out); break;
    case DType::kInt64: CastTyped<From, int64_t>(ctx, in, out); break;
    case DType::kBool: CastTyped<From, bool>(ctx, in, out); break;
    case DType::kFloat16: CastTyped<From, float16>(ctx, in, out); break;
    case DType::kUInt8: CastTyped<From, uint8_t>(ctx, in, out); break;
    case DType::kInt8: CastTyped<From, int8_t>(ctx, in, out); break;
    case DType::kUInt16: CastTyped<From, uint16_t>(ctx, in, out); break;
    case DType::kInt16: CastTyped<From, int16_t>(ctx, in, out); break;
    case DType::kUInt32: CastTyped<From, uint32_t>(ctx, in, out); break;
    case DType::kUInt64: CastTyped<From, uint64_t>(ctx, in, out); break;
    default: return Internal("Cast: unexpected target dtype");
  }
  return Status::Ok();
}

Status CastKernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  LS_ASSIGN_OR_RETURN(DType to, CastTarget(ctx.attrs(), in.dtype()));
  LS_ASSIGN_OR_RETURN(Tensor* out_ptr, ctx.AllocateOutput(0, to, in.shape()));
  Tensor& out = *out_ptr;
  if (in.num_elements() == 0) return Status::Ok();
  if (to == in.dtype()) {
    if (to == DType::kString) {
      auto src = in.data<std::string>();
      std::copy(src.begin(), src.end(), out.mutable_data<std::string>().begin());
    } else {
      std::memcpy(out.mutable_raw_data(), in.raw_data(), in.byte_size());
    }
    return Status::Ok();
  }
  switch (in.dtype()) {
    case DType::kFloat32: return CastFrom<float>(ctx, in, out);
    case DType::kFloat64: return CastFrom<double>(ctx, in, out);
    case DType::kBFloat16: return CastFrom<bfloat16>(ctx, in, out);
    case DType::kInt32: return CastFrom<int32_t>(ctx, in, out);
    case DType::kInt64: return CastFrom<int64_t>(ctx, in, out);
    case DType::kBool: return CastFrom<bool>(ctx, in, out);
    case DType::kFloat16: return CastFrom<float16>(ctx, in, out);
    case DType::kUInt8: return CastFrom<uint8_t>(ctx, in, out);
    case DType::kInt8: return CastFrom<int8_t>(ctx, in, out);
    case DType::kUInt16: return CastFrom<uint16_t>(ctx, in, out);
    case DType::kInt16: return CastFrom<int16_t>(ctx, in, out);
    case DType::kUInt32: return CastFrom<uint32_t>(ctx, in, out);
    case DType::kUInt64: return CastFrom<uint64_t>(ctx, in, out);
    case DType::kString: return CastFrom<std::string>(ctx, in, out);
    default: return Internal("Cast: unexpected source dtype");
  }
}

// The gradient of a cast between floating types: the incoming gradient in the input's dtype.
// A bfloat16 value's gradient is float32 already (gradient_builder.h), so the cast of a float32
// weight to bf16 passes its gradient straight through.
Status CastGradient(GradientBuilder& g) {
  const DType in = g.input_spec(0).dtype, out = g.output_spec(0).dtype;
  auto floating = [](DType d) { return IsReal(d) || d == DType::kBFloat16; };
  if (!floating(in) || !floating(out)) {
    return InvalidArgument("Cast: no gradient through a cast from " + Str(DTypeName(in)) + " to " +
                           Str(DTypeName(out)));
  }
  const DType arriving = out == DType::kBFloat16 ? DType::kFloat32 : out;
  if (arriving == in) {
    g.SetInputGrad(0, g.output_grad(0));
  } else {
    AttrMap attrs;
    attrs.Set("dtype", in);
    g.SetInputGrad(0, g.Op("Cast", {g.output_grad(0)}, std::move(attrs)));
  }
  return Status::Ok();
}

}  // namespace

void RegisterCastOps(OpRegistry& registry) {
  OpDef cast = SimpleOpDef("Cast", 1, InferCast, CastKernel);
  cast.gradient = CastGradient;
  (void)registry.Register(std::move(cast));
}

}  // namespace lockstep
