// numpy broadcasting for the element-wise kernels (math_ops.cc, elementwise_ops.cc). Internal
// to runtime/ops/.
//
// Broadcasting plan: the output shape is walked once, size-1 output dimensions are dropped and
// neighbouring dimensions in which every input is either broadcast or not are merged. What is
// left is an outer loop (odometer over the merged dimensions) around one inner row in which
// each input is either contiguous or a single repeated value, which is the shape the compiler
// vectorises. [N, C] + [C] becomes N rows of (contiguous, contiguous); x * scalar is one row.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string_view>

#include "runtime/ops/op_util.h"
#include "runtime/shape.h"
#include "runtime/status.h"
#include "runtime/tensor.h"
#include "runtime/thread_pool.h"

namespace lockstep {

template <int N>
struct BroadcastPlan {
  int rank = 0;  // at least 1
  std::array<int64_t, Shape::kMaxRank> dims{};
  // strides[k][d]: elements to step input k by along merged dimension d (0 when broadcast).
  std::array<std::array<int64_t, Shape::kMaxRank>, N> strides{};

  // Whether input k advances along the inner row (false: one value repeated).
  bool Contiguous(int k) const { return strides[k][rank - 1] != 0; }
};

// `out` is the broadcast of `ins`, all fully defined, with at least one element.
template <int N>
BroadcastPlan<N> MakePlan(const Shape& out, const std::array<const Shape*, N>& ins) {
  BroadcastPlan<N> plan;
  std::array<std::array<bool, Shape::kMaxRank>, N> bcast{};
  const int r = out.rank();
  for (int d = 0; d < r; ++d) {
    if (out.dim(d) == 1) continue;
    std::array<bool, N> flags{};
    for (int k = 0; k < N; ++k) {
      const int i = d - (r - ins[k]->rank());
      flags[k] = i < 0 || ins[k]->dim(i) == 1;
    }
    bool same = plan.rank > 0;
    for (int k = 0; k < N && same; ++k) same = bcast[k][plan.rank - 1] == flags[k];
    if (same) {
      plan.dims[plan.rank - 1] *= out.dim(d);
    } else {
      plan.dims[plan.rank] = out.dim(d);
      for (int k = 0; k < N; ++k) bcast[k][plan.rank] = flags[k];
      ++plan.rank;
    }
  }
  if (plan.rank == 0) {  // one element: every stride is irrelevant
    plan.rank = 1;
    plan.dims[0] = 1;
    return plan;
  }
  for (int k = 0; k < N; ++k) {
    int64_t step = 1;
    for (int d = plan.rank - 1; d >= 0; --d) {
      plan.strides[k][d] = bcast[k][d] ? 0 : step;
      if (!bcast[k][d]) step *= plan.dims[d];
    }
  }
  return plan;
}

// Calls row(out_offset, in_offsets, length) for every innermost row, rows split over the pool.
template <int N, typename RowFn>
void RunPlan(const BroadcastPlan<N>& plan, ThreadPool& pool, const RowFn& row) {
  const int outer_rank = plan.rank - 1;
  const int64_t inner = plan.dims[outer_rank];
  int64_t outer = 1;
  for (int d = 0; d < outer_rank; ++d) outer *= plan.dims[d];
  auto rows = [&](int64_t begin, int64_t end) {
    std::array<int64_t, Shape::kMaxRank> index{};
    std::array<int64_t, N> offsets{};
    int64_t rest = begin;
    for (int d = outer_rank - 1; d >= 0; --d) {
      index[d] = rest % plan.dims[d];
      rest /= plan.dims[d];
      for (int k = 0; k < N; ++k) offsets[k] += index[d] * plan.strides[k][d];
    }
    for (int64_t o = begin; o < end; ++o) {
      row(o * inner, offsets, inner);
      for (int d = outer_rank - 1; d >= 0; --d) {  // odometer step
        for (int k = 0; k < N; ++k) offsets[k] += plan.strides[k][d];
        if (++index[d] < plan.dims[d]) break;
        for (int k = 0; k < N; ++k) offsets[k] -= plan.dims[d] * plan.strides[k][d];
        index[d] = 0;
      }
    }
  };
  pool.ParallelFor(outer, std::max<int64_t>(1, kElementGrain / inner), rows);
}

// One row of out[i] = f(a[i], b[i]), with each side either contiguous or repeated; separate
// loops so each is a simple vectorisable form.
template <typename A, typename B, typename Out, typename F>
void BinaryRow(const A* a, bool a_step, const B* b, bool b_step, Out* out, int64_t n, const F& f) {
  if (a_step && b_step) {
    // Blocks of 16 first, a fixed-length loop: rows as short as a squeeze-and-excitation's
    // channels (32 of them, a row per pixel) paid more for the general loop's set-up than for
    // their elements.
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      for (int64_t l = 0; l < 16; ++l) out[i + l] = f(a[i + l], b[i + l]);
    }
    for (; i < n; ++i) out[i] = f(a[i], b[i]);
  } else if (a_step) {
    const B y = *b;
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], y);
  } else if (b_step) {
    const A x = *a;
    for (int64_t i = 0; i < n; ++i) out[i] = f(x, b[i]);
  } else {
    const Out v = f(*a, *b);
    for (int64_t i = 0; i < n; ++i) out[i] = v;
  }
}

// One row of out[i] = f(a[i], b[i], c[i]) for one pattern of contiguous (true) and repeated
// inputs, fixed at compile time so that the loop is a plain map.
template <bool SA, bool SB, bool SC, typename A, typename B, typename C, typename Out, typename F>
void TernaryRowFixed(const A* a, const B* b, const C* c, Out* out, int64_t n, const F& f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[SA ? i : 0], b[SB ? i : 0], c[SC ? i : 0]);
}

template <typename A, typename B, typename C, typename Out, typename F>
void TernaryRow(const A* a, bool a_step, const B* b, bool b_step, const C* c, bool c_step, Out* out,
                int64_t n, const F& f) {
  switch ((a_step ? 4 : 0) + (b_step ? 2 : 0) + (c_step ? 1 : 0)) {
    case 0: return TernaryRowFixed<false, false, false>(a, b, c, out, n, f);
    case 1: return TernaryRowFixed<false, false, true>(a, b, c, out, n, f);
    case 2: return TernaryRowFixed<false, true, false>(a, b, c, out, n, f);
    case 3: return TernaryRowFixed<false, true, true>(a, b, c, out, n, f);
    case 4: return TernaryRowFixed<true, false, false>(a, b, c, out, n, f);
    case 5: return TernaryRowFixed<true, false, true>(a, b, c, out, n, f);
    case 6: return TernaryRowFixed<true, true, false>(a, b, c, out, n, f);
    default: return TernaryRowFixed<true, true, true>(a, b, c, out, n, f);
  }
}

// out = f(a, b) element-wise over the broadcast of a and b; `out` is allocated with that shape
// (which may have no elements). A, B and Out are the element types of the three tensors.
template <typename A, typename B, typename Out, typename F>
void BroadcastMap2(ThreadPool& pool, const Tensor& a, const Tensor& b, Tensor& out, const F& f) {
  if (out.num_elements() == 0) return;
  const auto plan = MakePlan<2>(out.shape(), {&a.shape(), &b.shape()});
  const bool a_step = plan.Contiguous(0), b_step = plan.Contiguous(1);
  const A* pa = a.data<A>().data();
  const B* pb = b.data<B>().data();
  Out* po = out.mutable_data<Out>().data();
  RunPlan<2>(plan, pool, [&](int64_t o, const std::array<int64_t, 2>& in, int64_t n) {
    BinaryRow(pa + in[0], a_step, pb + in[1], b_step, po + o, n, f);
  });
}

// out = f(a, b, c) element-wise over the broadcast of the three (Where, Normalize).
template <typename A, typename B, typename C, typename Out, typename F>
void BroadcastMap3(ThreadPool& pool, const Tensor& a, const Tensor& b, const Tensor& c, Tensor& out,
                   const F& f) {
  if (out.num_elements() == 0) return;
  const auto plan = MakePlan<3>(out.shape(), {&a.shape(), &b.shape(), &c.shape()});
  const bool a_step = plan.Contiguous(0), b_step = plan.Contiguous(1), c_step = plan.Contiguous(2);
  const A* pa = a.data<A>().data();
  const B* pb = b.data<B>().data();
  const C* pc = c.data<C>().data();
  Out* po = out.mutable_data<Out>().data();
  RunPlan<3>(plan, pool, [&](int64_t o, const std::array<int64_t, 3>& in, int64_t n) {
    TernaryRow(pa + in[0], a_step, pb + in[1], b_step, pc + in[2], c_step, po + o, n, f);
  });
}

// numpy broadcasting of three shapes (-1 dimensions as in BroadcastShapes).
inline StatusOr<Shape> BroadcastShapes3(std::string_view op, const Shape& a, const Shape& b,
                                        const Shape& c) {
  LS_ASSIGN_OR_RETURN(Shape ab, BroadcastShapes(op, a, b));
  return BroadcastShapes(op, ab, c);
}

}  // namespace lockstep
