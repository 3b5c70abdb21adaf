// The post-processing and pooling ops of detection models, with ONNX's semantics (and
// onnxruntime's choices where the spec leaves one open):
//   NonMaxSuppression(boxes [B, N, 4], scores [B, C, N], max_output_boxes_per_class?,
//     iou_threshold?, score_threshold?; attr center_point_box) -> int64 [K, 3] rows
//     (batch, class, box): per batch and class, boxes by falling score (ties by index), each
//     kept unless its IoU with one kept before exceeds the threshold, at most the maximum
//     (default 0: none); only scores above score_threshold take part.
//   RoiAlign(x [N, C, H, W], rois [R, 4] (x1, y1, x2, y2), batch_indices [R]; attrs mode avg |
//     max, output_height, output_width, sampling_ratio, spatial_scale,
//     coordinate_transformation_mode half_pixel | output_half_pixel) -> [R, C, oh, ow]: each
//     bin the average (or maximum) of bilinear samples on a regular grid inside it.
// float32 and float64.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {
namespace {

// ---- NonMaxSuppression ----

StatusOr<std::vector<TensorSpec>> InferNms(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("NonMaxSuppression", ctx.inputs.size(), 2, 5));
  LS_RETURN_IF_ERROR(CheckReal("NonMaxSuppression", "boxes", ctx.inputs[0].dtype));
  LS_RETURN_IF_ERROR(CheckDType("NonMaxSuppression", "scores", ctx.inputs[1].dtype, ctx.inputs[0].dtype));
  LS_RETURN_IF_ERROR(CheckRank("NonMaxSuppression", "boxes [B, N, 4]", ctx.inputs[0].shape, 3));
  LS_RETURN_IF_ERROR(CheckRank("NonMaxSuppression", "scores [B, C, N]", ctx.inputs[1].shape, 3));
  return Single(DType::kInt64, Shape{-1, 3});
}

struct Corners {
  double y1, x1, y2, x2;
};

template <typename T>
Corners BoxAt(const T* b, bool center) {
  if (center) {
    const double xc = b[0], yc = b[1], w = b[2], h = b[3];
    return {yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2};
  }
  return {std::min<double>(b[0], b[2]), std::min<double>(b[1], b[3]), std::max<double>(b[0], b[2]),
          std::max<double>(b[1], b[3])};
}

// The boxes NonMaxSuppression kept so far, by coordinate (one array each), so that a candidate
// is tested against a block of them at once in a loop the compiler vectorises: a detector's
// proposals run to thousands kept out of tens of thousands. Intersection over union in float32,
// as onnxruntime computes it, 0 where the boxes do not meet (so a negative threshold keeps the
// first box alone).
class KeptBoxes {
 public:
  void clear() {
    for (std::vector<float>* v : {&y1_, &x1_, &y2_, &x2_, &area_}) v->clear();
  }
  int64_t size() const { return static_cast<int64_t>(y1_.size()); }
  void Add(const Corners& c) {
    const Box f = Narrow(c);
    y1_.push_back(f.y1);
    x1_.push_back(f.x1);
    y2_.push_back(f.y2);
    x2_.push_back(f.x2);
    area_.push_back(f.area);
  }
  // Whether `c` overlaps a kept box by more than `threshold`.
  bool Overlaps(const Corners& c, double threshold) const {
    constexpr size_t kBlock = 64;
    const Box f = Narrow(c);
    const float limit = static_cast<float>(threshold);
    for (size_t begin = 0; begin < y1_.size(); begin += kBlock) {
      const size_t end = std::min(y1_.size(), begin + kBlock);
      // Branch-free, so that it vectorises: inter / union > limit as inter > limit * union (the
      // union is positive wherever the boxes meet; where they do not, inter is 0).
      int hits = 0;
      for (size_t k = begin; k < end; ++k) {
        const float ih = std::max(0.0f, std::min(y2_[k], f.y2) - std::max(y1_[k], f.y1));
        const float iw = std::max(0.0f, std::min(x2_[k], f.x2) - std::max(x1_[k], f.x1));
        const float inter = ih * iw;
        const float uni = area_[k] + f.area - inter;
        hits += inter > limit * uni;
      }
      if (hits > 0) return true;
    }
    return false;
  }

 private:
  struct Box {
    float y1, x1, y2, x2, area;
  };
  static Box Narrow(const Corners& c) {
    const float y1 = static_cast<float>(c.y1), x1 = static_cast<float>(c.x1);
    const float y2 = static_cast<float>(c.y2), x2 = static_cast<float>(c.x2);
    return {y1, x1, y2, x2, (y2 - y1) * (x2 - x1)};
  }
  std::vector<float> y1_, x1_, y2_, x2_, area_;
};

// Optional scalar input i as a double, `fallback` when absent.
StatusOr<double> OptionalScalar(const KernelContext& ctx, int i, double fallback) {
  if (ctx.num_inputs() <= i || ctx.input(i).num_elements() == 0) return fallback;
  const Tensor& t = ctx.input(i);
  switch (t.dtype()) {
    case DType::kFloat32: return double{t.data<float>()[0]};
    case DType::kFloat64: return t.data<double>()[0];
    case DType::kInt64: return static_cast<double>(t.data<int64_t>()[0]);
    case DType::kInt32: return static_cast<double>(t.data<int32_t>()[0]);
    default: return InvalidArgument("NonMaxSuppression: input " + std::to_string(i) + " must be a number");
  }
}

Status NmsKernel(KernelContext& ctx) {
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  LS_RETURN_IF_ERROR(InferNms({std::vector<TensorSpec>{{boxes.dtype(), boxes.shape()}, {scores.dtype(), scores.shape()}},
                               ctx.attrs()})
                         .status());
  const int64_t batches = boxes.shape().dim(0), n = boxes.shape().dim(1), classes = scores.shape().dim(1);
  if (boxes.shape().dim(2) != 4 || scores.shape().dim(0) != batches || scores.shape().dim(2) != n) {
    return InvalidArgument("NonMaxSuppression: boxes " + boxes.shape().ToString() + " and scores " +
                           scores.shape().ToString() + " do not fit [B, N, 4] and [B, C, N]");
  }
  LS_ASSIGN_OR_RETURN(double max_boxes, OptionalScalar(ctx, 2, 0));
  LS_ASSIGN_OR_RETURN(double iou_threshold, OptionalScalar(ctx, 3, 0));
  LS_ASSIGN_OR_RETURN(double score_threshold, OptionalScalar(ctx, 4, -std::numeric_limits<double>::infinity()));
  const bool has_score_threshold = ctx.num_inputs() > 4 && ctx.input(4).num_elements() > 0;
  LS_ASSIGN_OR_RETURN(int64_t center, ctx.attrs().GetIntOr("center_point_box", 0));
  const int64_t limit = static_cast<int64_t>(std::clamp(max_boxes, 0.0, static_cast<double>(n)));
  std::vector<int64_t> selected;  // (batch, class, box) triples
  std::vector<int64_t> order;
  KeptBoxes kept;
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const T* b = boxes.data<T>().data();
    const T* s = scores.data<T>().data();
    for (int64_t batch = 0; batch < batches && limit > 0; ++batch) {
      for (int64_t c = 0; c < classes; ++c) {
        const T* cs = s + (batch * classes + c) * n;
        order.clear();
        for (int64_t i = 0; i < n; ++i) {
          if (!has_score_threshold || static_cast<double>(cs[i]) > score_threshold) order.push_back(i);
        }
        std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return cs[x] > cs[y]; });
        kept.clear();
        for (int64_t i : order) {
          if (kept.size() >= limit) break;
          const Corners box = BoxAt(b + (batch * n + i) * 4, center != 0);
          if (kept.Overlaps(box, iou_threshold)) continue;
          kept.Add(box);
          selected.insert(selected.end(), {batch, c, i});
        }
      }
    }
    return Status::Ok();
  };
  LS_RETURN_IF_ERROR(DispatchReal(boxes.dtype(), run));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DType::kInt64, Shape{static_cast<int64_t>(selected.size() / 3), 3}));
  std::copy(selected.begin(), selected.end(), out->mutable_data<int64_t>().begin());
  return Status::Ok();
}

// ---- RoiAlign ----

struct RoiParams {
  bool max = false;
  int64_t oh = 1, ow = 1, sampling = 0;
  double scale = 1.0;
  bool half_pixel = true;
};

StatusOr<RoiParams> ReadRoi(const AttrMap& attrs) {
  RoiParams p;
  LS_ASSIGN_OR_RETURN(std::string_view mode, attrs.GetStringViewOr("mode", "avg"));
  if (mode != "avg" && mode != "max") return InvalidArgument("RoiAlign: mode must be avg or max, got '" + Str(mode) + "'");
  p.max = mode == "max";
  LS_ASSIGN_OR_RETURN(p.oh, attrs.GetIntOr("output_height", 1));
  LS_ASSIGN_OR_RETURN(p.ow, attrs.GetIntOr("output_width", 1));
  LS_ASSIGN_OR_RETURN(p.sampling, attrs.GetIntOr("sampling_ratio", 0));
  LS_ASSIGN_OR_RETURN(p.scale, attrs.GetFloatOr("spatial_scale", 1.0));
  LS_ASSIGN_OR_RETURN(std::string_view coordinates, attrs.GetStringViewOr("coordinate_transformation_mode", "half_pixel"));
  if (coordinates != "half_pixel" && coordinates != "output_half_pixel") {
    return InvalidArgument("RoiAlign: coordinate_transformation_mode must be half_pixel or output_half_pixel");
  }
  p.half_pixel = coordinates == "half_pixel";
  if (p.oh < 1 || p.ow < 1 || p.oh > (1 << 16) || p.ow > (1 << 16) || p.sampling < 0 || p.sampling > (1 << 10)) {
    return InvalidArgument("RoiAlign: output sizes must be in [1, 65536] and sampling_ratio in [0, 1024]");
  }
  return p;
}

// One sample of a bin: the four pixels it reads and their bilinear weights; a sample outside
// the image (or of an empty image) reads nothing and counts as 0.
struct RoiTap {
  int64_t at[4] = {0, 0, 0, 0};
  double w[4] = {0, 0, 0, 0};
  bool inside = false;
};

RoiTap BilinearTap(double y, double xx, int64_t h, int64_t w) {
  RoiTap tap;
  if (h <= 0 || w <= 0 || y < -1.0 || y > static_cast<double>(h) || xx < -1.0 || xx > static_cast<double>(w)) return tap;
  y = std::max(y, 0.0);
  xx = std::max(xx, 0.0);
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(xx), y_high, x_high;
  if (y_low >= h - 1) {
    y_high = y_low = h - 1;
    y = static_cast<double>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= w - 1) {
    x_high = x_low = w - 1;
    xx = static_cast<double>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const double ly = y - static_cast<double>(y_low), lx = xx - static_cast<double>(x_low);
  const double hy = 1 - ly, hx = 1 - lx;
  tap.at[0] = y_low * w + x_low;
  tap.at[1] = y_low * w + x_high;
  tap.at[2] = y_high * w + x_low;
  tap.at[3] = y_high * w + x_high;
  tap.w[0] = hy * hx;
  tap.w[1] = hy * lx;
  tap.w[2] = ly * hx;
  tap.w[3] = ly * lx;
  tap.inside = true;
  return tap;
}

StatusOr<std::vector<TensorSpec>> InferRoiAlign(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("RoiAlign", ctx.inputs.size(), 3, 3));
  LS_RETURN_IF_ERROR(CheckReal("RoiAlign", "x", ctx.inputs[0].dtype));
  LS_RETURN_IF_ERROR(CheckDType("RoiAlign", "rois", ctx.inputs[1].dtype, ctx.inputs[0].dtype));
  LS_RETURN_IF_ERROR(CheckRank("RoiAlign", "x (NCHW)", ctx.inputs[0].shape, 4));
  LS_RETURN_IF_ERROR(CheckRank("RoiAlign", "rois [R, 4]", ctx.inputs[1].shape, 2));
  if (!IsIndexDType(ctx.inputs[2].dtype)) return InvalidArgument("RoiAlign: batch_indices must be int32 or int64");
  LS_ASSIGN_OR_RETURN(RoiParams p, ReadRoi(ctx.attrs));
  return Single(ctx.inputs[0].dtype, Shape{ctx.inputs[1].shape.dim(0), ctx.inputs[0].shape.dim(1), p.oh, p.ow});
}

Status RoiAlignKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  const Tensor& batch_indices = ctx.input(2);
  LS_ASSIGN_OR_RETURN(std::vector<TensorSpec> spec,
                      InferRoiAlign({std::vector<TensorSpec>{{x.dtype(), x.shape()}, {rois.dtype(), rois.shape()},
                                                             {batch_indices.dtype(), batch_indices.shape()}},
                                     ctx.attrs()}));
  LS_ASSIGN_OR_RETURN(RoiParams p, ReadRoi(ctx.attrs()));
  const int64_t r_count = rois.shape().dim(0), channels = x.shape().dim(1), h = x.shape().dim(2), w = x.shape().dim(3);
  if (rois.shape().dim(1) != 4 || batch_indices.num_elements() != r_count) {
    return InvalidArgument("RoiAlign: rois " + rois.shape().ToString() + " and batch_indices " +
                           batch_indices.shape().ToString() + " do not fit [R, 4] and [R]");
  }
  auto image_of = [&](int64_t r) {
    return batch_indices.dtype() == DType::kInt32 ? int64_t{batch_indices.data<int32_t>()[static_cast<size_t>(r)]}
                                                  : batch_indices.data<int64_t>()[static_cast<size_t>(r)];
  };
  for (int64_t r = 0; r < r_count; ++r) {
    if (image_of(r) < 0 || image_of(r) >= x.shape().dim(0)) {
      return InvalidArgument("RoiAlign: batch index " + std::to_string(image_of(r)) + " is not an image of " +
                             x.shape().ToString());
    }
  }
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), spec[0].shape));
  return DispatchReal(x.dtype(), [&](auto zero) -> Status {
    using T = decltype(zero);
    const T* src = x.data<T>().data();
    const T* box = rois.data<T>().data();
    T* dst = out->mutable_data<T>().data();
    const double offset = p.half_pixel ? 0.5 : 0.0;
    // Where region r's bins lie and how many samples each takes (none for an inverted region).
    struct Region {
      double x1, y1, bin_h, bin_w;
      int64_t grid_h, grid_w;
    };
    auto region = [&](int64_t r) {
      const double x1 = box[r * 4] * p.scale - offset, y1 = box[r * 4 + 1] * p.scale - offset;
      double rw = box[r * 4 + 2] * p.scale - offset - x1, rh = box[r * 4 + 3] * p.scale - offset - y1;
      if (!p.half_pixel) {
        rw = std::max(rw, 1.0);
        rh = std::max(rh, 1.0);
      }
      const auto grid = [&](double extent, int64_t bins) {
        if (p.sampling > 0) return p.sampling;
        const double g = std::ceil(extent / static_cast<double>(bins));
        return g > 0 ? static_cast<int64_t>(std::min(g, 1e9)) : int64_t{0};
      };
      return Region{x1, y1, rh / static_cast<double>(p.oh), rw / static_cast<double>(p.ow), grid(rh, p.oh), grid(rw, p.ow)};
    };
    // Adaptive sampling of a huge region would take unbounded time: refused, not run.
    constexpr int64_t kMaxSamplesPerBin = int64_t{1} << 16;
    for (int64_t r = 0; r < r_count; ++r) {
      const Region g = region(r);
      if (g.grid_h > kMaxSamplesPerBin || g.grid_w > kMaxSamplesPerBin || g.grid_h * g.grid_w > kMaxSamplesPerBin) {
        return InvalidArgument("RoiAlign: region " + std::to_string(r) + " would take " + std::to_string(g.grid_h) + " x " +
                               std::to_string(g.grid_w) + " samples per bin; set sampling_ratio or a smaller region");
      }
    }
    // Each bin's bilinear taps are worked out once and used for every channel (a detector's box
    // head has 256); regions run in parallel.
    ctx.pool().ParallelFor(r_count, 1, [&](int64_t r_begin, int64_t r_end) {
      thread_local std::vector<RoiTap> taps;
      for (int64_t r = r_begin; r < r_end; ++r) {
        const Region g = region(r);
        const int64_t per_bin = g.grid_h * g.grid_w;
        const double count = static_cast<double>(std::max<int64_t>(per_bin, 1));
        const T* planes = src + image_of(r) * channels * h * w;
        for (int64_t ph = 0; ph < p.oh; ++ph) {
          for (int64_t pw = 0; pw < p.ow; ++pw) {
            taps.clear();
            for (int64_t iy = 0; iy < g.grid_h; ++iy) {
              for (int64_t ix = 0; ix < g.grid_w; ++ix) {
                const double y = g.y1 + static_cast<double>(ph) * g.bin_h +
                                 (static_cast<double>(iy) + 0.5) * g.bin_h / static_cast<double>(g.grid_h);
                const double xx = g.x1 + static_cast<double>(pw) * g.bin_w +
                                  (static_cast<double>(ix) + 0.5) * g.bin_w / static_cast<double>(g.grid_w);
                taps.push_back(BilinearTap(y, xx, h, w));
              }
            }
            T* bin = dst + (r * channels * p.oh + ph) * p.ow + pw;
            for (int64_t c = 0; c < channels; ++c) {
              const T* plane = planes + c * h * w;
              double sum = 0;
              for (int64_t k = 0; k < per_bin; ++k) {
                const RoiTap& tap = taps[static_cast<size_t>(k)];
                double v = 0;
                if (tap.inside) {
                  const double v1 = tap.w[0] * plane[tap.at[0]], v2 = tap.w[1] * plane[tap.at[1]];
                  const double v3 = tap.w[2] * plane[tap.at[2]], v4 = tap.w[3] * plane[tap.at[3]];
                  v = p.max ? std::max({v1, v2, v3, v4}) : v1 + v2 + v3 + v4;
                }
                sum = !p.max ? sum + v : k == 0 ? v : std::max(sum, v);
              }
              bin[c * p.oh * p.ow] = static_cast<T>(p.max ? sum : sum / count);
            }
          }
        }
      }
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterDetectionOps(OpRegistry& registry) {
  OpDef nms = SimpleOpDef("NonMaxSuppression", 2, InferNms, NmsKernel);
  nms.max_inputs = 5;
  (void)registry.Register(std::move(nms));
  (void)registry.Register(SimpleOpDef("RoiAlign", 3, InferRoiAlign, RoiAlignKernel));
}

}  // namespace lockstep
