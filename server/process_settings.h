// Process-wide settings model-server applies first thing in main, before any thread starts:
// how glibc's malloc hands memory back, and Abseil's mutex debugging. The plain gRPC peer of
// the serving benchmarks applies them too, so that a comparison measures the serving code.
#pragma once

namespace lockstep {

void ApplyServerProcessSettings();

}  // namespace lockstep
