// ApplyServerProcessSettings turns off absl::Mutex's deadlock detector, which Debian's Abseil
// (built without NDEBUG) runs on every lock taken while another is held, recording the lock
// order in a global graph whose memory is never given back (the soak's memory climb). The
// detector's visible effect is on a lock-order inversion: it aborts the process, naming a
// potential deadlock. Each case runs in a child, so this process keeps its settings.
#include <absl/synchronization/mutex.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "server/process_settings.h"

namespace lockstep {
namespace {

void InvertLockOrder() {
  absl::Mutex a;
  absl::Mutex b;
  {
    absl::MutexLock hold_a(&a);
    absl::MutexLock hold_b(&b);
  }
  {
    absl::MutexLock hold_b(&b);
    absl::MutexLock hold_a(&a);
  }
}

// Shows the case below can fail: left as Debian ships it, Abseil aborts on the inversion.
TEST(ProcessSettingsDeathTest, DebiansAbseilAbortsOnALockOrderInversion) {
  EXPECT_DEATH(InvertLockOrder(), "[Pp]otential Mutex deadlock");
}

TEST(ProcessSettingsDeathTest, TheServersSettingsTrackNoLockOrder) {
  EXPECT_EXIT(
      {
        ApplyServerProcessSettings();
        InvertLockOrder();
        std::exit(0);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace lockstep
