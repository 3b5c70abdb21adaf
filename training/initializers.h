// Weight initialisers, seeded through training/random.h so a run is reproducible anywhere.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "runtime/status.h"
#include "training/random.h"

namespace lockstep::training {

// Fills `values` by `kind`: "glorot_uniform" (uniform in +-sqrt(6 / (fan_in + fan_out))),
// "he_uniform" (+-sqrt(6 / fan_in)), "zeros" or "ones" (a layer norm's scale).
Status Initialize(std::string_view kind, int64_t fan_in, int64_t fan_out, Random& rng,
                  std::span<float> values);

}  // namespace lockstep::training
