#include "server/process_settings.h"

#include <absl/synchronization/mutex.h>
#include <malloc.h>

namespace lockstep {

void ApplyServerProcessSettings() {
  // glibc raises its mmap threshold to the size of each large block freed, up to 32 MiB, so
  // after one big request (a 1M-element body) the blocks of later ones come from the heap and
  // stay resident after the request: 36 MB more, for good, in hostile_clients_test. A fixed
  // threshold gives blocks of 2 MiB and more back when freed. The hot paths reuse their
  // buffers (the batcher's, the sessions' arenas), so they do not pay for the mapping.
  mallopt(M_MMAP_THRESHOLD, 2 << 20);
  // Debian builds Abseil without NDEBUG, so absl::Mutex (every lock inside gRPC) runs its
  // debug deadlock detector: each lock taken while another is held is recorded in one global
  // lock-order graph, under one global spin lock, in memory Abseil maps 64 KiB at a time and
  // never gives back. Under the soak's gRPC load that graph was the resident memory's steady
  // climb (bench/soak/README.md). Abseil's release builds leave the detector off; so do we.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace lockstep
