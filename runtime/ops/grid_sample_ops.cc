// GridSample(x [N, C, H, W], grid [N, Ho, Wo, 2]; attrs mode = bilinear | nearest | bicubic,
// padding_mode = zeros | border | reflection, align_corners = 0) -> [N, C, Ho, Wo], as ONNX's
// (PyTorch's grid_sample): grid (x, y) in [-1, 1] spans the image's corner pixels' centres
// (align_corners) or its edges; outside, zeros reads 0, border the nearest edge pixel, and
// reflection mirrors the coordinate back inside. Bicubic uses a = -0.75. float32 and float64.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"

namespace lockstep {
namespace {

enum class GridMode { kBilinear, kNearest, kBicubic };
enum class GridPadding { kZeros, kBorder, kReflection };

struct GridParams {
  GridMode mode = GridMode::kBilinear;
  GridPadding padding = GridPadding::kZeros;
  bool align_corners = false;
};

StatusOr<GridParams> ReadGrid(const AttrMap& attrs) {
  GridParams p;
  LS_ASSIGN_OR_RETURN(std::string_view mode, attrs.GetStringViewOr("mode", "bilinear"));
  LS_ASSIGN_OR_RETURN(std::string_view padding, attrs.GetStringViewOr("padding_mode", "zeros"));
  LS_ASSIGN_OR_RETURN(p.align_corners, IntFlag(attrs, "align_corners", false));
  if (mode == "bilinear") p.mode = GridMode::kBilinear;
  else if (mode == "nearest") p.mode = GridMode::kNearest;
  else if (mode == "bicubic") p.mode = GridMode::kBicubic;
  else return InvalidArgument("GridSample: mode must be bilinear, nearest or bicubic, got '" + Str(mode) + "'");
  if (padding == "zeros") p.padding = GridPadding::kZeros;
  else if (padding == "border") p.padding = GridPadding::kBorder;
  else if (padding == "reflection") p.padding = GridPadding::kReflection;
  else return InvalidArgument("GridSample: padding_mode must be zeros, border or reflection, got '" + Str(padding) + "'");
  return p;
}

StatusOr<std::vector<TensorSpec>> InferGridSample(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("GridSample", ctx.inputs.size(), 2, 2));
  const TensorSpec& x = ctx.inputs[0];
  const TensorSpec& grid = ctx.inputs[1];
  LS_RETURN_IF_ERROR(CheckReal("GridSample", "x", x.dtype));
  LS_RETURN_IF_ERROR(CheckDType("GridSample", "grid", grid.dtype, x.dtype));
  LS_RETURN_IF_ERROR(CheckRank("GridSample", "x (NCHW)", x.shape, 4));
  LS_RETURN_IF_ERROR(CheckRank("GridSample", "grid [N, Ho, Wo, 2]", grid.shape, 4));
  LS_RETURN_IF_ERROR(ReadGrid(ctx.attrs).status());
  return Single(x.dtype, Shape{x.shape.dim(0), x.shape.dim(1), grid.shape.dim(1), grid.shape.dim(2)});
}

// Mirrors `v` into [lo, hi] as often as it takes.
double Reflect(double v, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (v < lo) {
    const double d = lo - v;
    const double n = std::floor(d / range), r = d - n * range;
    return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (v > hi) {
    const double d = v - hi;
    const double n = std::floor(d / range), r = d - n * range;
    return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return v;
}

struct Plane {
  int64_t h = 0, w = 0;
  GridParams p;

  // The grid coordinate in pixels, padded by the mode: border clamps, reflection mirrors.
  double Pixel(double g, int64_t size) const {
    double v = p.align_corners ? (g + 1) / 2 * static_cast<double>(size - 1) : ((g + 1) * static_cast<double>(size) - 1) / 2;
    if (p.padding == GridPadding::kBorder) {
      v = std::clamp(v, 0.0, static_cast<double>(size - 1));
    } else if (p.padding == GridPadding::kReflection) {
      v = p.align_corners ? Reflect(v, 0, static_cast<double>(size - 1)) : Reflect(v, -0.5, static_cast<double>(size) - 0.5);
    }
    // Far outside every tap reads the padding alike; bounded, the taps' indices cannot overflow
    // (a NaN coordinate lies far outside).
    return std::isnan(v) ? -8.0 : std::clamp(v, -8.0, static_cast<double>(size) + 8.0);
  }
  // The element at (y, x), by the padding mode where it lies outside.
  template <typename T>
  double At(const T* data, int64_t y, int64_t x) const {
    if (y < 0 || y >= h || x < 0 || x >= w) {
      if (p.padding == GridPadding::kZeros) return 0;
      if (p.padding == GridPadding::kReflection) {
        // A tap's index mirrors about the same bounds as the coordinate (onnxruntime's and the
        // reference's rule): without align_corners, -1 mirrors about -0.5 onto 0.
        const double lo = p.align_corners ? 0.0 : -0.5;
        y = static_cast<int64_t>(Reflect(static_cast<double>(y), lo, static_cast<double>(h - 1) - lo));
        x = static_cast<int64_t>(Reflect(static_cast<double>(x), lo, static_cast<double>(w - 1) - lo));
      }
      y = std::clamp<int64_t>(y, 0, h - 1);
      x = std::clamp<int64_t>(x, 0, w - 1);
    }
    return static_cast<double>(data[y * w + x]);
  }
};

void CubicWeights(double t, double* c) {
  constexpr double A = -0.75;
  const double s = 1 - t;
  c[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
  c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
  c[2] = ((A + 2) * s - (A + 3)) * s * s + 1;
  c[3] = ((A * (s + 1) - 5 * A) * (s + 1) + 8 * A) * (s + 1) - 4 * A;
}

Status GridSampleKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  LS_ASSIGN_OR_RETURN(std::vector<TensorSpec> spec,
                      InferGridSample({std::vector<TensorSpec>{{x.dtype(), x.shape()}, {grid.dtype(), grid.shape()}}, ctx.attrs()}));
  if (grid.shape().dim(0) != x.shape().dim(0) || grid.shape().dim(3) != 2) {
    return InvalidArgument("GridSample: grid " + grid.shape().ToString() + " does not fit x " + x.shape().ToString());
  }
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), spec[0].shape));
  if (out->num_elements() == 0) return Status::Ok();
  const int64_t n = x.shape().dim(0), c = x.shape().dim(1), ho = grid.shape().dim(1), wo = grid.shape().dim(2);
  Plane plane;
  plane.h = x.shape().dim(2);
  plane.w = x.shape().dim(3);
  LS_ASSIGN_OR_RETURN(plane.p, ReadGrid(ctx.attrs()));
  if (plane.h == 0 || plane.w == 0) return InvalidArgument("GridSample: x " + x.shape().ToString() + " is empty");
  return DispatchReal(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* src = x.data<T>().data();
    const T* g = grid.data<T>().data();
    T* dst = out->mutable_data<T>().data();
    ctx.pool().ParallelFor(n * c, 1, [&](int64_t b, int64_t e) {
      for (int64_t nc = b; nc < e; ++nc) {
        const int64_t image = nc / c;
        const T* data = src + nc * plane.h * plane.w;
        for (int64_t i = 0; i < ho * wo; ++i) {
          const T* at = g + (image * ho * wo + i) * 2;
          const double px = plane.Pixel(static_cast<double>(at[0]), plane.w);
          const double py = plane.Pixel(static_cast<double>(at[1]), plane.h);
          double v = 0;
          if (plane.p.mode == GridMode::kNearest) {
            v = plane.At(data, static_cast<int64_t>(std::nearbyint(py)), static_cast<int64_t>(std::nearbyint(px)));
          } else if (plane.p.mode == GridMode::kBilinear) {
            const double x0 = std::floor(px), y0 = std::floor(py), lx = px - x0, ly = py - y0;
            const int64_t xi = static_cast<int64_t>(x0), yi = static_cast<int64_t>(y0);
            v = (1 - ly) * ((1 - lx) * plane.At(data, yi, xi) + lx * plane.At(data, yi, xi + 1)) +
                ly * ((1 - lx) * plane.At(data, yi + 1, xi) + lx * plane.At(data, yi + 1, xi + 1));
          } else {
            const double x0 = std::floor(px), y0 = std::floor(py);
            double cx[4], cy[4];
            CubicWeights(px - x0, cx);
            CubicWeights(py - y0, cy);
            const int64_t xi = static_cast<int64_t>(x0) - 1, yi = static_cast<int64_t>(y0) - 1;
            for (int r = 0; r < 4; ++r) {
              double row = 0;
              for (int k = 0; k < 4; ++k) row += cx[k] * plane.At(data, yi + r, xi + k);
              v += cy[r] * row;
            }
          }
          dst[nc * ho * wo + i] = static_cast<T>(v);
        }
      }
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterGridSampleOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef("GridSample", 2, InferGridSample, GridSampleKernel));
}

}  // namespace lockstep
