#include "runtime/matmul/packed_b.h"

#include <cassert>

#include "runtime/matmul/packing.h"
#include "runtime/page_buffer.h"
#include "runtime/tensor.h"

namespace lockstep {

PackedB PackedB::Pack(const void* b, DType b_type, bool transpose, int64_t k, int64_t n, int64_t ldb,
                      DType compute_type, ThreadPool* pool) {
  PackedB packed;
  packed.Repack(b, b_type, transpose, k, n, ldb, compute_type, pool);
  return packed;
}

void PackedB::Repack(const void* b, DType b_type, bool transpose, int64_t k, int64_t n, int64_t ldb,
                     DType compute_type, ThreadPool* pool) {
  using namespace gemm_internal;
  assert(b_type == DType::kFloat32 || b_type == DType::kBFloat16);
  assert(compute_type == DType::kFloat32 || compute_type == DType::kBFloat16);
  assert(k >= 0 && n >= 0);
  const bool bf16 = compute_type == DType::kBFloat16;
  const size_t words = PackedBWords(k, n, bf16);
  if (words > capacity_words_ || storage_ == nullptr) {
    // At least one word, so that an empty matrix still reads as packed. A model's large
    // weights get huge pages (runtime/page_buffer.h): packing them faulted once per 4 KiB.
    storage_ = AllocateZeroedLarge(std::max<size_t>(words, 1) * sizeof(uint32_t));
    capacity_words_ = std::max<size_t>(words, 1);
  }
  uint32_t* dst = static_cast<uint32_t*>(storage_.get());
  num_words_ = words;
  k_ = k;
  n_ = n;
  compute_type_ = compute_type;

  const MatrixView view{b, b_type, ldb, transpose};
  const int64_t num_kb = NumKBlocks(k, bf16);
  const int64_t panels = PaddedN(n) / kNr;
  auto pack = [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      PackBPanels(view, bf16, k, n, unit / panels, unit % panels, unit % panels + 1, dst);
    }
  };
  const int64_t units = num_kb * panels;
  if (pool != nullptr) {
    pool->ParallelFor(units, 4, pack);
  } else {
    pack(0, units);
  }
}

}  // namespace lockstep
