// The interface bench_matmul_compare times every library through: Lockstep itself and each
// peer (oneDNN, OpenBLAS, Eigen), one file each. A library prepares a problem once (packed
// weights, primitives, plans, its own buffers: everything a framework would keep between
// calls) and then runs it many times, so that the timed loop holds nothing but the product.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench/matmul/shapes.h"

namespace lockstep::bench {

// 64-byte aligned storage for `count` elements of a trivial type, uninitialised: every library
// gets the same alignment, so none wins or loses on a split cache line.
template <typename T>
class AlignedArray {
 public:
  explicit AlignedArray(int64_t count)
      : data_(static_cast<T*>(std::aligned_alloc(64, RoundUp(static_cast<size_t>(count) * sizeof(T))))) {
    if (data_ == nullptr) std::abort();
  }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }

 private:
  static size_t RoundUp(size_t bytes) { return (std::max<size_t>(bytes, 1) + 63) / 64 * 64; }
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
};

// One product to run: C = op(A) * op(B), with the layout `shape` gives. A and B are both
// bfloat16 (lockstep::bfloat16, the upper half of a float32) when `bf16`, both float32
// otherwise; C is float32 either way.
struct MatmulProblem {
  const MatmulShape& shape;
  bool bf16;
  const void* a;
  const void* b;
  float* c;
};

// A problem, prepared: Run() is what the benchmark times.
class PreparedMatmul {
 public:
  virtual ~PreparedMatmul() = default;
  virtual void Run() = 0;
  // The kernel or implementation this problem runs on, when the library says per problem
  // (oneDNN's impl_info_str); empty otherwise.
  virtual std::string Kernel() const { return {}; }
};

class MatmulLibrary {
 public:
  virtual ~MatmulLibrary() = default;
  virtual std::string_view name() const = 0;
  // Lines for the report's header: version, the instruction set or kernel chosen, and any
  // environment setting that changes it.
  virtual std::vector<std::string> Describe() const = 0;
  // Makes later Prepare/Run use `threads` threads (the calling thread counts). Returns what the
  // library reports back, so the report shows the setting took. Problems prepared before must
  // be destroyed first: they may hold the old threads.
  virtual std::string SetThreads(int threads) = 0;
  // Prepares `problem` with the current thread count; B is packed here, outside the timed loop,
  // exactly when problem.shape.b_prepacked. nullptr when the library cannot run the problem at
  // all (Describe says why), which the tables show as n/a.
  virtual std::unique_ptr<PreparedMatmul> Prepare(const MatmulProblem& problem) = 0;
};

std::unique_ptr<MatmulLibrary> MakeLockstepLibrary();
std::unique_ptr<MatmulLibrary> MakeOneDnnLibrary();
std::unique_ptr<MatmulLibrary> MakeOpenBlasLibrary();
std::unique_ptr<MatmulLibrary> MakeEigenLibrary();

}  // namespace lockstep::bench
