// The matrix products the matmul benchmarks time, shared by bench_matmul (Lockstep alone,
// Google Benchmark) and bench_matmul_compare (Lockstep next to oneDNN, OpenBLAS and Eigen), so
// that both binaries always measure the same list.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::bench {

// C[M, N] = op(A)[M, K] * op(B)[K, N], row-major, leading dimensions tight.
struct MatmulShape {
  std::string name;  // as --shapes takes it: "512x512x512", "mlp2.dx"
  int64_t m = 0, k = 0, n = 0;
  bool transpose_a = false;  // A stored [K, M]
  bool transpose_b = false;  // B stored [N, K]
  // B is a constant weight that a framework packs once (serving; the square shapes). When
  // false, B is an activation or a gradient, or a weight that changes every training step:
  // nothing may pack it ahead of the call, for Lockstep and peers alike.
  bool b_prepacked = true;

  double Flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n); }
  int64_t lda() const { return transpose_a ? m : k; }
  int64_t ldb() const { return transpose_b ? k : n; }
  int64_t ldc() const { return n; }
  int64_t a_elements() const { return m * k; }
  int64_t b_elements() const { return k * n; }
  int64_t c_elements() const { return m * n; }
  // "A*B", "A*B^T" or "A^T*B".
  std::string_view OpName() const;
};

// Every shape, in table order: the plain M x K x N list, then the MLP 784-1024-1024-10 at batch
// 256, layer by layer: forward Y = X*W (W packed), then backward dX = dY*W^T and dW = X^T*dY.
const std::vector<MatmulShape>& AllShapes();

// Resolves a comma-separated --shapes value: shape names, "mlp" (all nine MLP products),
// "plain" (the M x K x N list) or "all". Prints why and returns nullopt on an unknown name.
std::optional<std::vector<MatmulShape>> SelectShapes(std::string_view list);

// Splits "a,b,c"; empty items are dropped.
std::vector<std::string> SplitList(std::string_view list);

}  // namespace lockstep::bench
