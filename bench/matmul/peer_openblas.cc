// OpenBLAS: cblas_sgemm for float32, cblas_sbgemm for bfloat16 where the build exports it.
// BLAS has no pre-packed operand, so OpenBLAS packs B on every call whatever the shape says;
// its packing buffers come from a pool allocated once, so nothing is allocated per call.
//
// cblas.h declares cblas_sbgemm whether or not the library was built with BUILD_BFLOAT16
// (Debian's 0.3.21 is not), so it is looked up at run time: a direct call would not link.
#include <cblas.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>

#include "bench/matmul/peers.h"

namespace lockstep::bench {
namespace {

using SbgemmFn = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint, blasint, float,
                          const uint16_t*, blasint, const uint16_t*, blasint, float, float*, blasint);

SbgemmFn FindSbgemm() { return reinterpret_cast<SbgemmFn>(dlsym(RTLD_DEFAULT, "cblas_sbgemm")); }

class OpenBlasMatmul : public PreparedMatmul {
 public:
  OpenBlasMatmul(const MatmulProblem& problem, SbgemmFn sbgemm) : p_(problem), sbgemm_(sbgemm) {}

  void Run() override {
    const MatmulShape& s = p_.shape;
    const CBLAS_TRANSPOSE ta = s.transpose_a ? CblasTrans : CblasNoTrans;
    const CBLAS_TRANSPOSE tb = s.transpose_b ? CblasTrans : CblasNoTrans;
    if (p_.bf16) {
      sbgemm_(CblasRowMajor, ta, tb, s.m, s.n, s.k, 1.0f, static_cast<const uint16_t*>(p_.a), s.lda(),
              static_cast<const uint16_t*>(p_.b), s.ldb(), 0.0f, p_.c, s.ldc());
    } else {
      cblas_sgemm(CblasRowMajor, ta, tb, s.m, s.n, s.k, 1.0f, static_cast<const float*>(p_.a), s.lda(),
                  static_cast<const float*>(p_.b), s.ldb(), 0.0f, p_.c, s.ldc());
    }
  }

 private:
  MatmulProblem p_;
  SbgemmFn sbgemm_;
};

class OpenBlasLibrary : public MatmulLibrary {
 public:
  std::string_view name() const override { return "openblas"; }

  std::vector<std::string> Describe() const override {
    std::vector<std::string> lines = {std::string("core ") + openblas_get_corename() + ", config " +
                                      openblas_get_config()};
    lines.push_back(sbgemm_ != nullptr ? "cblas_sbgemm: exported (bf16 measured)"
                                       : "cblas_sbgemm: not exported by this build (bf16 n/a)");
    lines.push_back("no pre-packed B in BLAS: B is packed on every call in every row");
    // A core type forced in the environment overrides detection; a wrong one silently halves
    // throughput, which is why it is shouted here.
    if (const char* core = std::getenv("OPENBLAS_CORETYPE")) {
      lines.push_back(std::string("WARNING: OPENBLAS_CORETYPE=") + core + " overrides the detected core");
    }
    for (const char* var : {"OPENBLAS_NUM_THREADS", "OPENBLAS_VERBOSE"}) {
      if (const char* value = std::getenv(var)) lines.push_back(std::string("note: ") + var + "=" + value);
    }
    return lines;
  }

  std::string SetThreads(int threads) override {
    openblas_set_num_threads(threads);
    return "openblas_get_num_threads() = " + std::to_string(openblas_get_num_threads());
  }

  std::unique_ptr<PreparedMatmul> Prepare(const MatmulProblem& problem) override {
    if (problem.bf16 && sbgemm_ == nullptr) return nullptr;
    return std::make_unique<OpenBlasMatmul>(problem, sbgemm_);
  }

 private:
  SbgemmFn sbgemm_ = FindSbgemm();
};

}  // namespace

std::unique_ptr<MatmulLibrary> MakeOpenBlasLibrary() { return std::make_unique<OpenBlasLibrary>(); }

}  // namespace lockstep::bench
