// The version policy as a pure function: given the versions on disk, which ones should be
// served (TF Serving's aspired versions).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model_store/model_config.h"

namespace lockstep {

// latest N: the N highest of `on_disk`; all: every one; specific: those listed that exist on
// disk (a listed version missing on disk is simply not aspired yet). `on_disk` need not be
// sorted; the answer is ascending and free of duplicates.
std::vector<int64_t> AspiredVersions(const VersionPolicy& policy, std::span<const int64_t> on_disk);

}  // namespace lockstep
