// The allocation tests' binary replaces the global operator new and delete (counting_new.cc) so
// that every heap allocation made through them is counted; a tensor's storage is counted
// through its shared control block.
#pragma once

#include <cstdint>

namespace lockstep::alloc_test {

// Allocations made so far, on every thread.
int64_t Allocations();

}  // namespace lockstep::alloc_test
