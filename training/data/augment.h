// Image augmentation in the input pipeline (model-train's data.augment; never in the exported
// graph). Each training example, an image [height, width, channels] stored row-major in its
// features, is shifted by a random offset in [-crop_padding, crop_padding] along each axis,
// zeros coming in at the edges: the same as cropping the image padded with crop_padding zeros
// on every side back to its own size (torchvision's RandomCrop(size, padding)). Then, with
// horizontal_flip, it is mirrored left to right with probability 1/2. Zeros are raw zeros (a
// black pixel): the normalisation in the graph comes after.
//
// The draws depend only on (seed, epoch, the example's position in the epoch's order of the
// global batch): the same whatever the replicas, the workers, the threads assembling batches, or
// a resume part-way through an epoch.
#pragma once

#include <cstdint>
#include <span>

#include "training/data/batch_ring.h"

namespace lockstep::training {

struct AugmentOptions {
  int64_t crop_padding = 0;
  bool horizontal_flip = false;
  int64_t height = 0, width = 0, channels = 0;  // one example's image
  uint64_t seed = 0;

  bool enabled() const { return crop_padding > 0 || horizontal_flip; }
};

// Augments `image` (height * width * channels values) in place.
void AugmentImage(const AugmentOptions& options, int64_t epoch, int64_t position, std::span<float> image);

// Augments every row of `batch`; row r is the example at `first_position` + r.
void AugmentBatch(const AugmentOptions& options, int64_t epoch, int64_t first_position, BatchBuffers& batch);

}  // namespace lockstep::training
