// The global operator new of bench_json_reader, counting calls so that each benchmark can say
// how many allocations one body costs. In a file of its own: inlined into its callers, GCC
// takes new and free for a mismatched pair (-Wmismatched-new-delete).
#include <atomic>
#include <cstdlib>
#include <new>

#include "bench/serving/json_reader_bench.h"

namespace {
std::atomic<int64_t> g_allocations{0};
}

namespace lockstep_bench {
int64_t AllocationCount() { return g_allocations.load(std::memory_order_relaxed); }
}  // namespace lockstep_bench

void* operator new(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t size) { return ::operator new(size); }
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size ? size : 1);
}
void* operator new[](size_t size, const std::nothrow_t& t) noexcept { return ::operator new(size, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
