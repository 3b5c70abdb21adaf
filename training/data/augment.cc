#include "training/data/augment.h"

#include <algorithm>
#include <cstring>

#include "training/random.h"

namespace lockstep::training {
namespace {

// The generator of one example's draws.
Random ExampleRandom(uint64_t seed, int64_t epoch, int64_t position) {
  uint64_t key = seed ^ 0x6a09e667f3bcc909ULL;
  key = key * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(epoch);
  key = key * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(position);
  return Random(key);
}

// Shifts the image in place: pixel (y, x) takes the one at (y + dy, x + dx), zero outside. Walks
// in the direction that reads each pixel before it is overwritten.
void Shift(std::span<float> image, int64_t h, int64_t w, int64_t c, int64_t dy, int64_t dx) {
  float* p = image.data();
  auto move_pixel = [&](int64_t y, int64_t x) {
    const int64_t sy = y + dy, sx = x + dx;
    float* to = p + (y * w + x) * c;
    if (sy < 0 || sy >= h || sx < 0 || sx >= w) {
      std::fill(to, to + c, 0.0f);
    } else {
      std::memmove(to, p + (sy * w + sx) * c, static_cast<size_t>(c) * sizeof(float));
    }
  };
  if (dy > 0 || (dy == 0 && dx > 0)) {
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) move_pixel(y, x);
    }
  } else {
    for (int64_t y = h - 1; y >= 0; --y) {
      for (int64_t x = w - 1; x >= 0; --x) move_pixel(y, x);
    }
  }
}

void FlipLeftRight(std::span<float> image, int64_t h, int64_t w, int64_t c) {
  for (int64_t y = 0; y < h; ++y) {
    float* row = image.data() + y * w * c;
    for (int64_t x = 0; x < w / 2; ++x) {
      std::swap_ranges(row + x * c, row + (x + 1) * c, row + (w - 1 - x) * c);
    }
  }
}

}  // namespace

void AugmentImage(const AugmentOptions& options, int64_t epoch, int64_t position, std::span<float> image) {
  if (!options.enabled()) return;
  Random rng = ExampleRandom(options.seed, epoch, position);
  const int64_t h = options.height, w = options.width, c = options.channels;
  if (options.crop_padding > 0) {
    const auto span = static_cast<uint64_t>(2 * options.crop_padding + 1);
    const int64_t dy = static_cast<int64_t>(rng.Below(span)) - options.crop_padding;
    const int64_t dx = static_cast<int64_t>(rng.Below(span)) - options.crop_padding;
    if (dy != 0 || dx != 0) Shift(image, h, w, c, dy, dx);
  }
  if (options.horizontal_flip && rng.Below(2) == 1) FlipLeftRight(image, h, w, c);
}

void AugmentBatch(const AugmentOptions& options, int64_t epoch, int64_t first_position, BatchBuffers& batch) {
  if (!options.enabled()) return;
  const int64_t f = options.height * options.width * options.channels;
  for (int64_t r = 0; r < batch.rows; ++r) {
    AugmentImage(options, epoch, first_position + r, batch.features.subspan(static_cast<size_t>(r * f), static_cast<size_t>(f)));
  }
}

}  // namespace lockstep::training
