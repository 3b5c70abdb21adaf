#include "runtime/matmul/gemm.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <memory>
#include <span>

#include "runtime/matmul/gemm_path.h"
#include "runtime/matmul/microkernel.h"
#include "runtime/matmul/packing.h"
#include "runtime/tensor.h"

namespace lockstep {
namespace {

using namespace gemm_internal;

// A task computes a tile of C: up to kMaxTaskStrips strips of rows by up to kMaxTaskPanels
// panels of columns, all of K. It packs its rows of A for the whole of K, one K block of them
// at most kMaxTaskABytes (about L2: a larger block spills, while a smaller one makes more row
// tasks, each of them streaming all of B). Then either each B panel goes down every strip,
// K block by K block, or, when the task's B block is small, each strip sweeps all the panels
// (see RunTask). Capping a K block rather than all of K: on 64 x 4096 x 4096 float32, one row
// task reading the four 288 KB blocks of A from L3 beat two reading the 64 MB of B from
// memory (2 threads: 0.90 -> 1.00-1.03x oneDNN).
constexpr int64_t kMaxTaskStrips = 8;
constexpr int64_t kMaxTaskPanels = 64;
constexpr int64_t kMaxTaskABytes = 1024 * 1024;
// A task whose B block is at most this size has each strip sweep every panel in one kernel
// call (the block stays in L2); a larger one takes panel after panel past every strip.
constexpr int64_t kMaxSweptBBytes = 256 * 1024;
// Below this a product runs on the calling thread: handing work to a worker (about 1 us when
// it is spinning, 5 when it sleeps) costs more than it saves.
constexpr int64_t kMinParallelFlops = int64_t{1} << 19;
// From this size on, several tasks per thread, claimed one at a time, so that a worker that
// wakes late or a core that something else on the machine slows is evened out. Below it, one
// task per thread: short products keep their wide multi-panel kernels.
constexpr int64_t kManyTasksFlops = int64_t{1} << 24;
constexpr int64_t kTasksPerThread = 4;
// Up to this many tasks, each thread has a home block of them (see Gemm).
constexpr int64_t kMaxClaimedTasks = 64;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Thread-local storage that only grows.
class Buffer {
 public:
  template <typename T>
  T* Get(int64_t count) {
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T);
    if (bytes > capacity_) {
      storage_ = AllocateAligned(std::max(bytes, capacity_ + capacity_ / 2));
      capacity_ = std::max(bytes, capacity_ + capacity_ / 2);
    }
    return static_cast<T*>(storage_.get());
  }

 private:
  std::shared_ptr<void> storage_;
  size_t capacity_ = 0;
};

struct Scratch {
  Buffer a;  // the packed A block of the last task this thread ran
  // Which rows of which call `a` holds: a thread's next task over the same rows of the same
  // call (tasks that all cover every row, or a home block's run along one row band) reuses it.
  uint64_t a_call = 0;
  int64_t a_i0 = -1, a_rows = 0;
  Buffer t;  // a task's columns not computed in C itself (see RunTask)
  Buffer b;  // op(B) packed for one call, when the caller did not pack it
  Buffer swapped;  // C transposed, for a product computed as its transpose (GemmSwapped)
};

Scratch& LocalScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// Everything the tasks of one call share.
struct Call {
  const GemmArgs& g;
  bool bf16;
  const KernelTable& kernels;
  MatrixView a;
  const uint32_t* b;  // the whole packed op(B)
  int64_t b_n;        // the columns of that packing (block offsets follow from it)
  int64_t b_panel0;   // the panel op(B) starts at (GemmArgs::packed_b_col0)
  int64_t num_kb;
  uint64_t id;  // unique per Gemm call (see Scratch::a_call)
  bool direct_a;  // A read in place by the direct kernels, not packed (UsesDirectA)
};

// A product whose K is at most this many words (floats, or bf16 pairs) reads A in place
// (KernelTable::direct_one) instead of packing it, when A already is the compute type's words:
// a float32 A for float32 products, a bf16 A of even K and even leading dimension (so that
// no pair straddles two rows) for bf16 ones. A strip's rows (12 x 512 words, 24 KB) then stay
// in L1 while the kernel sweeps the panels, and packing A cost as much as the products of a
// narrow layer (12544 x 16 x 16: 42 -> 78 GFLOP/s; 3136 x 144 x 24: 65 -> 79). Past it the
// twelve rows read at once missed L1 (2048^3: 95 -> 79 % of the peak).
constexpr int64_t kMaxDirectADepth = 512;

bool UsesDirectA(const GemmArgs& g, bool bf16, const KernelTable& kernels) {
  if (g.transpose_a || StepsFor(g.k, bf16) > kMaxDirectADepth || kernels.direct_one[1] == nullptr) return false;
  if (!bf16) return g.a_type == DType::kFloat32;
  return g.a_type == DType::kBFloat16 && g.k % 2 == 0 && g.lda % 2 == 0 &&
         reinterpret_cast<uintptr_t>(g.a) % sizeof(uint32_t) == 0;
}

// A's leading dimension in words, for the direct kernels.
int64_t DirectLda(const GemmArgs& g, bool bf16) { return bf16 ? g.lda / 2 : g.lda; }

// The epilogue of rows [i, i + rows) and columns [j0, j0 + nc) of C, each step a separate float
// operation in the documented order so that an unfused graph (MatMul, then BiasAdd, then the
// activation op) rounds identically. `t` (leading dimension ldt) holds the dot products; it may
// be C itself (then beta is 0).
void EpilogueRows(const GemmArgs& g, int64_t i, int64_t rows, int64_t j0, int64_t nc, float* t, int64_t ldt) {
  if (g.alpha != 1.0f || g.beta != 0.0f) {
    for (int64_t r = 0; r < rows; ++r) {
      float* tr = t + r * ldt;
      const float* c = g.c + (i + r) * g.ldc + j0;
      if (g.alpha != 1.0f) {
        for (int64_t j = 0; j < nc; ++j) tr[j] *= g.alpha;
      }
      if (g.beta != 0.0f) {
        for (int64_t j = 0; j < nc; ++j) tr[j] += g.beta * c[j];
      }
    }
  }
  EpilogueBlock block;
  block.in = t;
  block.ld_in = ldt;
  block.out = g.c + i * g.ldc + j0;
  block.ld_out = g.ldc;
  block.rows = rows;
  block.cols = nc;
  if (g.epilogue.bias != nullptr) block.bias = g.epilogue.bias + j0;
  if (g.epilogue.residual != nullptr) block.residual = g.epilogue.residual + i * g.epilogue.ldr + j0;
  block.ldr = g.epilogue.ldr;
  block.activation = g.epilogue.activation;
  ApplyEpilogue(block);
}

bool HasEpilogue(const GemmArgs& g) {
  return g.alpha != 1.0f || g.beta != 0.0f || g.epilogue.bias != nullptr ||
         g.epilogue.activation != Activation::kNone || g.epilogue.residual != nullptr;
}

// Rows [i, i + mr) of C over panels [q0, q1), asked for (for writing) two strips ahead of the
// kernel that writes them. StartTile asks for a tile's lines as it starts, but a K loop shorter
// than the miss (the narrow layers' K of 16 or 24) leaves the stores waiting, and a strip's rows
// written a panel at a time, 128 bytes in every N * 4, are a pattern the hardware prefetchers
// do not follow. EfficientNet-B0's first expansion at batch 8 (100352 x 16 x 96, a 38 MB C
// written to memory): 47 -> 55 GFLOP/s on one thread.
// Rows at or past `end` (the task's) are another task's: left alone.
void PrefetchStripOfC(const GemmArgs& g, int64_t i, int64_t mr, int64_t end, int64_t q0, int64_t q1) {
  if (q0 >= q1) return;
  const int64_t bytes = (std::min(g.n, q1 * kNr) - q0 * kNr) * static_cast<int64_t>(sizeof(float));
  for (int64_t r = i; r < std::min(i + mr, end); ++r) {
    const char* row = reinterpret_cast<const char*>(g.c + r * g.ldc + q0 * kNr);
    for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(row + off, 1, 3);
    __builtin_prefetch(row + bytes - 1, 1, 3);
  }
}

// Packs rows [i0, i0 + rows) of op(A), all of K, block after block: block kb at
// dst + strips * mr * kb * kKcSteps, strips = CeilDiv(rows, mr).
void PackA(const Call& call, int64_t i0, int64_t rows, uint32_t* dst) {
  const int64_t mr = call.kernels.mr;
  const int64_t strips = CeilDiv(rows, mr);
  const int64_t block_k = BlockK(call.bf16);
  for (int64_t kb = 0; kb < call.num_kb; ++kb) {
    const int64_t k0 = kb * block_k;
    PackAStrips(call.a, call.bf16, static_cast<int>(mr), i0, rows, k0, std::min(block_k, call.g.k - k0),
                call.g.k, dst + strips * mr * kb * kKcSteps);
  }
}

// Rows [i0, i0 + rows) by panels [panel0, panel1) of C. Panels wholly inside C are computed
// in C itself when beta is 0 (C's old values are not needed); the rest, a partial last panel
// or everything when beta is not 0, in a scratch tile that the epilogue copies out.
void RunTask(const Call& call, int64_t i0, int64_t rows, int64_t panel0, int64_t panel1) {
  const GemmArgs& g = call.g;
  const KernelTable& kt = call.kernels;
  const int64_t mr = kt.mr;
  const int64_t strips = CeilDiv(rows, mr);
  const int64_t n_panels = CeilDiv(g.n, kNr);
  // A last panel of exactly kNr / 2 columns is whole in C too: the half kernel writes only those.
  const int64_t panels_in_c = g.n / kNr + (g.n % kNr == kNr / 2 ? 1 : 0);
  const int64_t direct_end = g.beta == 0.0f ? std::clamp(panels_in_c, panel0, panel1) : panel0;
  const int64_t ldt = (panel1 - direct_end) * kNr;
  const bool epilogue = HasEpilogue(g);
  Scratch& scratch = LocalScratch();
  float* t = scratch.t.Get<float>(strips * mr * ldt);

  if (call.num_kb == 0) {  // K = 0: every dot product is zero
    const int64_t j0 = panel0 * kNr;
    const int64_t cols = std::min(g.n, panel1 * kNr) - j0;
    float* zeros = scratch.t.Get<float>(cols);
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(zeros, zeros + cols, 0.0f);
      EpilogueRows(g, i0 + r, 1, j0, cols, zeros, cols);
    }
    return;
  }
  // The whole K of the task's rows is packed first, block after block, so that each tile of
  // C then takes every K block in turn while it is still in L1.
  const int64_t block_k = BlockK(call.bf16);
  const int64_t total_steps = StepsFor(g.k, call.bf16);
  // Reusing a block packed by this thread rather than sharing one packed by the caller: a
  // worker reading the caller's copy paid a cache miss per k step, and the caller packing
  // before the tasks start kept the worker waiting (32 x 784 x 512 on 2 threads: 0.87 ->
  // 0.95-1.0x oneDNN).
  uint32_t* ap = call.direct_a ? nullptr : scratch.a.Get<uint32_t>(strips * mr * total_steps);
  if (!call.direct_a && (scratch.a_call != call.id || scratch.a_i0 != i0 || scratch.a_rows != rows)) {
    PackA(call, i0, rows, ap);
    scratch.a_call = call.id;
    scratch.a_i0 = i0;
    scratch.a_rows = rows;
  }
  // The distance from one strip to the next (in words: a float32 A's are its floats), and where
  // K block kb of strip s starts: in the packed copy, or in A itself for the direct kernels.
  const int64_t direct_lda = call.direct_a ? DirectLda(g, call.bf16) : 0;
  auto strip_stride = [&](int64_t steps) { return call.direct_a ? mr * direct_lda : steps * mr; };
  auto strip_at = [&](int64_t kb, int64_t s, int64_t steps) -> const uint32_t* {
    if (call.direct_a) {
      return static_cast<const uint32_t*>(g.a) + i0 * direct_lda + kb * kKcSteps + s * strip_stride(steps);
    }
    return ap + strips * mr * kb * kKcSteps + s * strip_stride(steps);
  };
  const MicroKernelFn* one = call.direct_a ? kt.direct_one : kt.one;
  const MicroKernelFn* half_fn = call.direct_a ? kt.direct_half : kt.half;

  // A last panel with at most kNr / 2 valid columns takes the half-width kernel.
  const bool half_panel = g.n % kNr != 0 && g.n % kNr <= kNr / 2;
  MicroKernelArgs args;
  args.lda = direct_lda;
  // Points args at K block kb: its step count and whether it adds to earlier blocks; returns
  // the step count (the strides of both operands' blocks follow from it).
  auto set_k_block = [&](int64_t kb) {
    const int64_t steps = StepsFor(std::min(block_k, g.k - kb * block_k), call.bf16);
    args.steps = steps;
    args.b_panel_stride = steps * kNr;
    args.accumulate = kb > 0;
    return steps;
  };
  // Strip s over panels [q0, q1), which all lie on one side of direct_end, all of K, then the
  // epilogue on what it computed.
  auto run = [&](int64_t s, int64_t q0, int64_t q1) {
    if (q0 >= q1) return;
    const int64_t valid = std::min(mr, rows - s * mr);
    const int64_t i = i0 + s * mr;
    const bool direct = q0 < direct_end;
    float* out = direct ? g.c + i * g.ldc + q0 * kNr : t + s * mr * ldt + (q0 - direct_end) * kNr;
    args.ldt = direct ? g.ldc : ldt;
    const int wide = kt.panels[valid];
    // `groups` runs of `panels` panels from panel `first_panel` on, every K block.
    auto call_kernel = [&](int64_t first_panel, int64_t groups, int64_t panels, MicroKernelFn fn) {
      if (groups <= 0) return;
      args.groups = groups;
      args.a_group_stride = 0;
      args.t_group_stride = panels * kNr;
      for (int64_t kb = 0; kb < call.num_kb; ++kb) {
        const int64_t steps = set_k_block(kb);
        args.b_group_stride = panels * args.b_panel_stride;
        args.a = strip_at(kb, s, steps);
        args.b = call.b + PackedBBlockOffset(kb, call.b_n) + (call.b_panel0 + first_panel) * args.b_panel_stride;
        args.t = out + (first_panel - q0) * kNr;
        fn(args);
      }
    };
    const bool half_last = q1 == n_panels && half_panel;
    const int64_t full_end = half_last ? q1 - 1 : q1;
    const int64_t wide_groups = call.direct_a ? 0 : (full_end - q0) / wide;
    call_kernel(q0, wide_groups, wide, kt.wide[valid]);
    const int64_t q = q0 + wide_groups * wide;
    call_kernel(q, full_end - q, 1, one[valid]);
    if (half_last) call_kernel(full_end, 1, 1, half_fn[valid]);
    if (direct && !epilogue) return;
    const int64_t j0 = q0 * kNr;
    const int64_t cols = std::min(g.n, q1 * kNr) - j0;
    EpilogueRows(g, i, valid, j0, cols, out, args.ldt);
  };
  const int64_t b_block_bytes = total_steps * (panel1 - panel0) * kNr * 4;
  if (strips == 1 || b_block_bytes <= kMaxSweptBBytes) {
    // Short M, or a B block that stays in L2 anyway (short K): each strip sweeps all the
    // panels in one kernel call, several panels at a time where the kernel can.
    for (int64_t s = 0; s < strips; ++s) {
      PrefetchStripOfC(g, i0 + (s + 2) * mr, mr, i0 + rows, panel0, direct_end);
      run(s, panel0, direct_end);
      run(s, direct_end, panel1);
    }
  } else {
    // Each K block of a B panel stays in cache while it goes down every strip of the A block,
    // the full strips in one kernel call.
    const int64_t full_strips = rows / mr;
    for (int64_t q = panel0; q < panel1; ++q) {
      const bool direct = q < direct_end;
      float* out = direct ? g.c + i0 * g.ldc + q * kNr : t + (q - direct_end) * kNr;
      const int64_t ld = direct ? g.ldc : ldt;
      const bool half = q == n_panels - 1 && half_panel;
      args.ldt = ld;
      args.b_group_stride = 0;
      args.t_group_stride = mr * ld;
      for (int64_t kb = 0; kb < call.num_kb; ++kb) {
        const int64_t steps = set_k_block(kb);
        args.a_group_stride = strip_stride(steps);
        args.b = call.b + PackedBBlockOffset(kb, call.b_n) + (call.b_panel0 + q) * args.b_panel_stride;
        if (full_strips > 0) {
          args.groups = full_strips;
          args.a = strip_at(kb, 0, steps);
          args.t = out;
          (half ? half_fn[mr] : one[mr])(args);
        }
        if (full_strips < strips) {
          const int64_t valid = rows - full_strips * mr;
          args.groups = 1;
          args.a = strip_at(kb, full_strips, steps);
          args.t = out + full_strips * mr * ld;
          (half ? half_fn[valid] : one[valid])(args);
        }
      }
      if (direct && !epilogue) continue;
      const int64_t j0 = q * kNr;
      const int64_t cols = std::min(g.n, j0 + kNr) - j0;
      EpilogueRows(g, i0, rows, j0, cols, out, ld);
    }
  }
}

// Runs fn(i) for i in [0, count) on the pool's threads. Up to kMaxClaimedTasks items, each
// thread first takes its own block of them, the same block on every call (so what it touches
// stays in its core's L2 from one call to the next, and B panels a thread packs are the ones
// it then computes with), then helps with what others have left, one item at a time.
template <typename Fn>
void RunClaimed(ThreadPool& pool, int64_t threads, int64_t count, const Fn& fn) {
  if (count <= kMaxClaimedTasks) {
    std::array<std::atomic<bool>, kMaxClaimedTasks> claimed{};
    pool.ParallelFor(std::min(threads, count), 1, [&](int64_t, int64_t) {
      const int64_t first = ThreadPool::ThisThreadIndex() % threads * count / threads;
      for (int64_t i = 0; i < count; ++i) {
        const int64_t item = (first + i) % count;
        if (!claimed[item].exchange(true, std::memory_order_relaxed)) fn(item);
      }
    });
    return;
  }
  std::atomic<int64_t> next{0};
  pool.ParallelFor(std::min(threads, count), 1, [&](int64_t, int64_t) {
    for (int64_t item; (item = next.fetch_add(1, std::memory_order_relaxed)) < count;) fn(item);
  });
}

// op(B) packed into the calling thread's scratch, shared out over the pool when worth it.
const uint32_t* PackBForCall(const GemmArgs& g, bool bf16, ThreadPool* pool) {
  uint32_t* dst = LocalScratch().b.Get<uint32_t>(static_cast<int64_t>(PackedBWords(g.k, g.n, bf16)));
  const MatrixView view{g.b, g.b_type, g.ldb, g.transpose_b};
  const int64_t panels = PaddedN(g.n) / kNr;
  const int64_t num_kb = NumKBlocks(g.k, bf16);
  const int64_t units = num_kb * panels;
  // Panel-major units, so a thread's home block is a range of columns, as in the product.
  auto pack = [&](int64_t u) {
    PackBPanels(view, bf16, g.k, g.n, u % num_kb, u / num_kb, u / num_kb + 1, dst);
  };
  if (pool != nullptr) {
    RunClaimed(*pool, pool->num_threads(), units, pack);
  } else {
    for (int64_t u = 0; u < units; ++u) pack(u);
  }
  return dst;
}

// The tile of C one task computes: `strips` strips by `panels` panels.
struct Split {
  int64_t strips = 1;
  int64_t panels = 1;
};

// Picks the task tile. Among tiles within the caps (kMaxTaskStrips, kMaxTaskABytes,
// kMaxTaskPanels), first the one whose busiest thread has the fewest strip x panel tiles to
// compute (each thread takes its share of tasks), then the one that moves the fewest bytes:
// each row of tasks reads all of B, each column of tasks packs all of A. `many` asks for
// several tasks per thread. The choice never changes a result, only the speed.
Split ChooseSplit(int64_t m_strips, int64_t n_panels, int64_t k, int64_t mr, bool bf16, int64_t threads,
                  bool many) {
  const int64_t a_strip_bytes = mr * std::clamp<int64_t>(StepsFor(k, bf16), 1, kKcSteps) * 4;
  const int64_t max_strips = std::clamp(kMaxTaskABytes / a_strip_bytes, int64_t{1}, kMaxTaskStrips);
  const int64_t min_tasks = std::min(m_strips * n_panels, many ? threads * kTasksPerThread : threads);
  Split best;
  int64_t best_tiles = -1;
  double best_bytes = 0;
  for (int64_t strips = std::min(m_strips, max_strips); strips >= 1; --strips) {
    const int64_t row_tasks = CeilDiv(m_strips, strips);
    if (CeilDiv(m_strips, row_tasks) != strips) continue;  // the same tasks as a shorter tile
    for (int64_t panels = std::min(n_panels, kMaxTaskPanels); panels >= 1; --panels) {
      const int64_t col_tasks = CeilDiv(n_panels, panels);
      if (CeilDiv(n_panels, col_tasks) != panels) continue;
      const int64_t tasks = row_tasks * col_tasks;
      if (tasks < min_tasks) continue;
      const int64_t tiles = CeilDiv(tasks, threads) * strips * panels;
      const double bytes = static_cast<double>(row_tasks) * static_cast<double>(k * n_panels * kNr) +
                           static_cast<double>(col_tasks) * static_cast<double>(m_strips * mr * k);
      if (best_tiles < 0 || tiles < best_tiles || (tiles == best_tiles && bytes < best_bytes)) {
        best = {strips, panels};
        best_tiles = tiles;
        best_bytes = bytes;
      }
      if (tasks >= min_tasks * 8) break;  // narrower tiles only add tasks from here on
    }
  }
  return best;
}

// Whether to compute C as the transpose of op(B)^T * op(A)^T: for an unpacked B of at most
// half a panel of columns (dW of a 10-class output layer, M = 1024, N = 10). Computed as it
// is, the half-panel kernel wastes 16 - N of its 16 lanes and op(A), the big operand, is
// packed in short strips; transposed, every lane computes and the big operand is packed in
// full panels. The dot products, and so the results, are the same either way.
bool ComputeSwapped(const GemmArgs& g) {
  return g.packed_b == nullptr && g.n <= kNr / 2 && g.m >= 2 * kNr && g.k > 0;
}

void GemmSwapped(const GemmArgs& g, ThreadPool* pool) {
  float* ct = LocalScratch().swapped.Get<float>(g.n * g.m);  // [N, M]
  GemmArgs t;
  t.m = g.n;
  t.n = g.m;
  t.k = g.k;
  t.a = g.b;
  t.a_type = g.b_type;
  t.lda = g.ldb;
  t.transpose_a = !g.transpose_b;
  t.b = g.a;
  t.b_type = g.a_type;
  t.ldb = g.lda;
  t.transpose_b = !g.transpose_a;
  t.bf16_compute = g.bf16_compute;
  t.c = ct;
  t.ldc = g.m;
  Gemm(t, pool);
  float row[kNr / 2];
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) row[j] = ct[j * g.m + i];
    EpilogueRows(g, i, 1, 0, g.n, row, g.n);
  }
}

}  // namespace

void Gemm(const GemmArgs& g, ThreadPool* pool) {
  if (g.m <= 0 || g.n <= 0) return;
  if (ComputeSwapped(g)) return GemmSwapped(g, pool);
  const bool bf16 = g.packed_b != nullptr
                        ? g.packed_b->compute_type() == DType::kBFloat16
                        : g.bf16_compute || g.a_type == DType::kBFloat16 || g.b_type == DType::kBFloat16;
  const GemmPath path = ActiveGemmPath();
  const KernelTable& kernels = bf16 ? Bf16Kernels(path) : F32Kernels(path);
  const int64_t threads = pool != nullptr ? pool->num_threads() : 1;
  const int64_t flops = 2 * g.m * g.n * std::max<int64_t>(g.k, 1);
  const bool parallel = threads > 1 && flops >= kMinParallelFlops;

  const uint32_t* b = g.packed_b != nullptr ? g.packed_b->words()
                                            : PackBForCall(g, bf16, parallel ? pool : nullptr);
  static std::atomic<uint64_t> calls{0};
  const int64_t b_n = g.packed_b != nullptr ? g.packed_b->n() : g.n;
  const int64_t b_panel0 = g.packed_b != nullptr ? g.packed_b_col0 / kNr : 0;
  Call call{g,        bf16,
            kernels,  MatrixView{g.a, g.a_type, g.lda, g.transpose_a},
            b,        b_n,
            b_panel0, NumKBlocks(g.k, bf16),
            calls.fetch_add(1, std::memory_order_relaxed) + 1, UsesDirectA(g, bf16, kernels)};

  const int64_t mr = kernels.mr;
  const int64_t m_strips = CeilDiv(g.m, mr);
  const int64_t n_panels = CeilDiv(g.n, kNr);
  const Split split = ChooseSplit(m_strips, n_panels, g.k, mr, bf16, parallel ? threads : 1,
                                  parallel && flops >= kManyTasksFlops);
  const int64_t task_strips = split.strips, task_panels = split.panels;
  const int64_t col_tasks = CeilDiv(n_panels, task_panels);
  const int64_t tasks = CeilDiv(m_strips, task_strips) * col_tasks;
  auto run = [&](int64_t task) {
    const int64_t i0 = (task / col_tasks) * task_strips * mr;
    const int64_t p0 = (task % col_tasks) * task_panels;
    RunTask(call, i0, std::min(task_strips * mr, g.m - i0), p0, std::min(p0 + task_panels, n_panels));
  };
  if (!parallel || tasks == 1) {
    for (int64_t task = 0; task < tasks; ++task) run(task);
    return;
  }
  RunClaimed(*pool, threads, tasks, run);
}

}  // namespace lockstep
