// DepthToSpace and SpaceToDepth on NCHW tensors, as ONNX defines them (attrs blocksize b and,
// for DepthToSpace, mode "DCR" | "CRD"): each output element is one input element, moved.
//   DepthToSpace: [N, C, H, W] -> [N, C / b², H * b, W * b]; output (n, c, h * b + i, w * b + j)
//     reads channel (i * b + j) * C / b² + c (DCR: depth, column, row) or c * b² + i * b + j (CRD).
//   SpaceToDepth: [N, C, H, W] -> [N, C * b², H / b, W / b]; output channel (i * b + j) * C + c
//     of (h, w) reads (c, h * b + i, w * b + j), DepthToSpace's DCR inverse.
// Any dtype but strings.
#include <cstdint>
#include <cstring>
#include <string>

#include "runtime/op_registry.h"
#include "runtime/ops/dtype_sets.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {
namespace {

struct SpaceGeometry {
  int64_t b = 1;
  bool crd = false;
  Shape out;
};

// -1 stays -1; a known dimension must divide.
int64_t Scaled(int64_t d, int64_t multiply, int64_t divide) { return d < 0 ? -1 : d * multiply / divide; }

template <bool kToSpace>
StatusOr<SpaceGeometry> SpaceShape(const AttrMap& attrs, const TensorSpec& x) {
  const char* op = kToSpace ? "DepthToSpace" : "SpaceToDepth";
  LS_RETURN_IF_ERROR(CheckDTypeIn(op, x.dtype, DTypeSet::kNonString));
  LS_RETURN_IF_ERROR(CheckRank(op, "x (NCHW)", x.shape, 4));
  SpaceGeometry g;
  LS_ASSIGN_OR_RETURN(g.b, attrs.GetInt("blocksize"));
  if (g.b < 1 || g.b > (int64_t{1} << 16)) return InvalidArgument(Str(op) + ": blocksize " + std::to_string(g.b) + " is not in [1, 65536]");
  if (kToSpace) {
    LS_ASSIGN_OR_RETURN(std::string_view mode, attrs.GetStringViewOr("mode", "DCR"));
    if (mode != "DCR" && mode != "CRD") return InvalidArgument("DepthToSpace: mode must be DCR or CRD, got '" + Str(mode) + "'");
    g.crd = mode == "CRD";
  }
  const int64_t c = x.shape.dim(1), h = x.shape.dim(2), w = x.shape.dim(3), bb = g.b * g.b;
  if (kToSpace ? c >= 0 && c % bb != 0 : (h >= 0 && h % g.b != 0) || (w >= 0 && w % g.b != 0)) {
    return InvalidArgument(Str(op) + ": blocksize " + std::to_string(g.b) + " does not divide " + x.shape.ToString());
  }
  g.out = kToSpace ? Shape{x.shape.dim(0), Scaled(c, 1, bb), Scaled(h, g.b, 1), Scaled(w, g.b, 1)}
                   : Shape{x.shape.dim(0), Scaled(c, bb, 1), Scaled(h, 1, g.b), Scaled(w, 1, g.b)};
  return g;
}

template <bool kToSpace>
StatusOr<std::vector<TensorSpec>> InferSpace(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(kToSpace ? "DepthToSpace" : "SpaceToDepth", ctx.inputs.size(), 1, 1));
  LS_ASSIGN_OR_RETURN(SpaceGeometry g, SpaceShape<kToSpace>(ctx.attrs, ctx.inputs[0]));
  return Single(ctx.inputs[0].dtype, g.out);
}

template <bool kToSpace>
Status SpaceKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_ASSIGN_OR_RETURN(SpaceGeometry g, SpaceShape<kToSpace>(ctx.attrs(), {x.dtype(), x.shape()}));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), g.out));
  if (x.num_elements() == 0) return Status::Ok();
  // In the space-side coordinates (n, c, h, w) of the [N, C_small, H_big, W_big] tensor, with
  // (i, j) the position in the block, the depth-side channel of element (c, i, j).
  const Shape& space = kToSpace ? g.out : x.shape();
  const int64_t n = space.dim(0), cs = space.dim(1), hb = space.dim(2), wb = space.dim(3), b = g.b;
  const int64_t depth_c = cs * b * b, hs = hb / b, ws = wb / b;
  const size_t size = DTypeSize(x.dtype());
  const auto* src = static_cast<const uint8_t*>(x.raw_data());
  auto* dst = static_cast<uint8_t*>(out->mutable_raw_data());
  for (int64_t in = 0; in < n; ++in) {
    for (int64_t c = 0; c < cs; ++c) {
      for (int64_t h = 0; h < hb; ++h) {
        for (int64_t w = 0; w < wb; ++w) {
          const int64_t i = h % b, j = w % b;
          const int64_t dc = g.crd ? (c * b + i) * b + j : (i * b + j) * cs + c;
          const int64_t space_at = ((in * cs + c) * hb + h) * wb + w;
          const int64_t depth_at = ((in * depth_c + dc) * hs + h / b) * ws + w / b;
          const int64_t from = kToSpace ? depth_at : space_at, to = kToSpace ? space_at : depth_at;
          std::memcpy(dst + static_cast<size_t>(to) * size, src + static_cast<size_t>(from) * size, size);
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace

void RegisterSpaceOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef("DepthToSpace", 1, InferSpace<true>, SpaceKernel<true>));
  (void)registry.Register(SimpleOpDef("SpaceToDepth", 1, InferSpace<false>, SpaceKernel<false>));
}

}  // namespace lockstep
