// PackedB: the right-hand operand of a matrix product, packed once into the layout the matmul
// kernels read, for a B used many times. A loaded model packs each constant weight matrix when
// its session is built, so no request ever packs one; a trainer packs a weight once per step.
//
// The layout is the same for every instruction-set path (runtime/matmul/microkernel.h), so a
// PackedB stays valid whichever path Gemm runs on.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/dtype.h"
#include "runtime/thread_pool.h"

namespace lockstep {

class PackedB {
 public:
  PackedB() = default;
  // Move-only: Repack writes the storage in place, which a copy must not share.
  PackedB(PackedB&&) = default;
  PackedB& operator=(PackedB&&) = default;
  PackedB(const PackedB&) = delete;
  PackedB& operator=(const PackedB&) = delete;

  // Packs op(b), which is [k, n]: b is stored [k, n] with leading dimension ldb, or [n, k]
  // when `transpose`. `b_type` is kFloat32 or kBFloat16. `compute_type` is the type the
  // products take their inputs in: kFloat32 (bf16 widens exactly), or kBFloat16 (float32 is
  // rounded to nearest even, as a mixed-precision step does with its master weights). `pool`
  // (may be null) shares the work out.
  static PackedB Pack(const void* b, DType b_type, bool transpose, int64_t k, int64_t n, int64_t ldb,
                      DType compute_type, ThreadPool* pool = nullptr);

  // Packs again into the same storage when the size allows, so a trainer re-packing every
  // step does not allocate.
  void Repack(const void* b, DType b_type, bool transpose, int64_t k, int64_t n, int64_t ldb,
              DType compute_type, ThreadPool* pool = nullptr);

  bool empty() const { return storage_ == nullptr; }
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  DType compute_type() const { return compute_type_; }
  size_t bytes() const { return num_words_ * sizeof(uint32_t); }
  // The packed words, for the matmul core.
  const uint32_t* words() const { return static_cast<const uint32_t*>(storage_.get()); }

 private:
  std::shared_ptr<void> storage_;
  size_t capacity_words_ = 0;
  size_t num_words_ = 0;
  int64_t k_ = 0, n_ = 0;
  DType compute_type_ = DType::kFloat32;
};

}  // namespace lockstep
