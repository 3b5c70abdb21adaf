// oneDNN's matmul primitive, called the way frameworks call it: the primitive is created once
// per problem and thread count, and a weight (shape.b_prepacked) is described with
// format_tag::any and reordered once into the layout the chosen implementation wants, outside
// the timed loop. When B is an activation or gradient it stays plain (ab, or ba for B^T), and
// the implementation copies it as it needs on every call, as Lockstep's unpacked Gemm does.
//
// Debian builds oneDNN on OpenMP (libgomp): its thread count is OpenMP's, set here with
// omp_set_num_threads on the calling thread, which is the thread that executes the primitive.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <dnnl.hpp>
#include <unordered_map>

#include "bench/matmul/peers.h"

namespace lockstep::bench {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

const char* IsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

class OneDnnMatmul : public PreparedMatmul {
 public:
  OneDnnMatmul(const MatmulProblem& problem, const dnnl::engine& engine, dnnl::stream& stream) : stream_(stream) {
    const MatmulShape& s = problem.shape;
    const memory::data_type in_type = problem.bf16 ? memory::data_type::bf16 : memory::data_type::f32;
    // A stored [K, M] is the [M, K] matrix in column-major order, which oneDNN spells "ba".
    const memory::desc a_md({s.m, s.k}, in_type, s.transpose_a ? tag::ba : tag::ab);
    const memory::desc b_user_md({s.k, s.n}, in_type, s.transpose_b ? tag::ba : tag::ab);
    const memory::desc c_md({s.m, s.n}, memory::data_type::f32, tag::ab);
    const memory::desc b_md = s.b_prepacked ? memory::desc({s.k, s.n}, in_type, tag::any) : b_user_md;

    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), engine);
    impl_ = pd.impl_info_str();
    memory a_mem(a_md, engine, const_cast<void*>(problem.a));
    memory b_user(b_user_md, engine, const_cast<void*>(problem.b));
    memory c_mem(c_md, engine, problem.c);
    memory b_mem = b_user;
    if (s.b_prepacked) {
      // The pre-packed weight: reordered once into oneDNN's own buffer.
      b_mem = memory(pd.weights_desc(), engine);
      dnnl::reorder(b_user, b_mem).execute(stream_, b_user, b_mem);
      stream_.wait();
    }
    primitive_ = dnnl::matmul(pd);
    // The argument map too is built once: constructing it allocates.
    args_ = {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}};
  }

  void Run() override {
    primitive_.execute(stream_, args_);
    stream_.wait();
  }
  std::string Kernel() const override { return impl_; }

 private:
  dnnl::stream& stream_;
  dnnl::matmul primitive_;
  std::unordered_map<int, memory> args_;
  std::string impl_;
};

class OneDnnLibrary : public MatmulLibrary {
 public:
  std::string_view name() const override { return "onednn"; }

  std::vector<std::string> Describe() const override {
    const dnnl::version_t* v = dnnl::version();
    char line[200];
    std::snprintf(line, sizeof line, "oneDNN %d.%d.%d, effective ISA %s, CPU runtime %s", v->major, v->minor, v->patch,
                  IsaName(dnnl::get_effective_cpu_isa()),
                  v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "not OpenMP (thread count not set here)");
    std::vector<std::string> lines = {line,
                                      "matmul primitive; weights pre-packed (format_tag::any + reorder) "
                                      "only where the table says B packed"};
    for (const char* var : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "OMP_NUM_THREADS", "ONEDNN_VERBOSE"}) {
      if (const char* value = std::getenv(var)) lines.push_back(std::string("note: ") + var + "=" + value);
    }
    return lines;
  }

  std::string SetThreads(int threads) override {
    omp_set_num_threads(threads);
    return "omp_get_max_threads() = " + std::to_string(omp_get_max_threads());
  }

  std::unique_ptr<PreparedMatmul> Prepare(const MatmulProblem& problem) override {
    try {
      return std::make_unique<OneDnnMatmul>(problem, engine_, stream_);
    } catch (const dnnl::error& e) {
      std::fprintf(stderr, "onednn: %s: %s\n", problem.shape.name.c_str(), e.what());
      return nullptr;
    }
  }

 private:
  dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream_{engine_};
};

}  // namespace

std::unique_ptr<MatmulLibrary> MakeOneDnnLibrary() { return std::make_unique<OneDnnLibrary>(); }

}  // namespace lockstep::bench
