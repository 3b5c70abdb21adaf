#include "training/initializers.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace lockstep::training {

Status Initialize(std::string_view kind, int64_t fan_in, int64_t fan_out, Random& rng,
                  std::span<float> values) {
  if (kind == "zeros" || kind == "ones") {
    std::fill(values.begin(), values.end(), kind == "ones" ? 1.0f : 0.0f);
    return Status::Ok();
  }
  double limit;
  if (kind == "glorot_uniform") {
    limit = std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(fan_in + fan_out, 1)));
  } else if (kind == "he_uniform") {
    limit = std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(fan_in, 1)));
  } else {
    return InvalidArgument("unknown initializer '" + std::string(kind) +
                           "' (glorot_uniform, he_uniform, zeros, ones)");
  }
  for (float& v : values) v = static_cast<float>((2.0 * rng.UniformFloat() - 1.0) * limit);
  return Status::Ok();
}

}  // namespace lockstep::training
