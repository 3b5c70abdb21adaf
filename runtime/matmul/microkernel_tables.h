// Builds a KernelTable from a kernel template, for the kernels_*.cc files only.
// Kernel<R, P, kHalf> is a struct with a static Run computing R rows and P panels (with kHalf,
// one panel's first kNr / 2 columns); `Wide(r)` is the panel count a strip of r rows uses.
// Everything here is evaluated at compile time, so no code from it can end up shared between
// files compiled for different instruction sets.
#pragma once

#include <cstddef>
#include <utility>

#include "runtime/matmul/microkernel.h"

namespace lockstep::gemm_internal {

template <template <int, int, bool> class Kernel, int Mr, int (*Wide)(int), size_t... I>
constexpr KernelTable MakeKernelTableImpl(const char* name, std::index_sequence<I...>) {
  return KernelTable{name,
                     Mr,
                     {0, Wide(static_cast<int>(I) + 1)...},
                     {nullptr, &Kernel<static_cast<int>(I) + 1, Wide(static_cast<int>(I) + 1), false>::Run...},
                     {nullptr, &Kernel<static_cast<int>(I) + 1, 1, false>::Run...},
                     {nullptr, &Kernel<static_cast<int>(I) + 1, 1, true>::Run...}};
}

template <template <int, int, bool> class Kernel, int Mr, int (*Wide)(int)>
constexpr KernelTable MakeKernelTable(const char* name) {
  static_assert(Mr >= 1 && Mr <= kMaxMr);
  return MakeKernelTableImpl<Kernel, Mr, Wide>(name, std::make_index_sequence<Mr>());
}

// `table` with its direct kernels (KernelTable::direct_one, direct_half) from Direct<R, kHalf>.
template <template <int, bool> class Direct, int Mr, size_t... I>
constexpr KernelTable WithDirectKernelsImpl(KernelTable table, std::index_sequence<I...>) {
  ((table.direct_one[I + 1] = &Direct<static_cast<int>(I) + 1, false>::Run), ...);
  ((table.direct_half[I + 1] = &Direct<static_cast<int>(I) + 1, true>::Run), ...);
  return table;
}

template <template <int, bool> class Direct, int Mr>
constexpr KernelTable WithDirectKernels(KernelTable table) {
  static_assert(Mr >= 1 && Mr <= kMaxMr);
  return WithDirectKernelsImpl<Direct, Mr>(table, std::make_index_sequence<Mr>());
}

}  // namespace lockstep::gemm_internal
