// Image augmentation in the input pipeline: each augmented image is a crop of the image padded
// with zeros (and maybe mirrored), every shift and both flips are drawn, and the draws depend
// only on (seed, epoch, position), so batches are the same whatever the threads, the workers
// or a resume.
#include "training/data/augment.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <vector>

#include "training/data/pipeline.h"

namespace lockstep::training {
namespace {

constexpr int64_t kH = 5, kW = 4, kC = 2;

// Pixel (y, x) channel k holds 1 + (y * kW + x) * kC + k: every value distinct and non-zero.
std::vector<float> CountingImage() {
  std::vector<float> image(static_cast<size_t>(kH * kW * kC));
  std::iota(image.begin(), image.end(), 1.0f);
  return image;
}

// The image padded with `p` zeros, cropped at (p + dy, p + dx), mirrored when `flip`.
std::vector<float> Reference(const std::vector<float>& image, int64_t dy, int64_t dx, bool flip) {
  std::vector<float> out(image.size(), 0.0f);
  for (int64_t y = 0; y < kH; ++y) {
    for (int64_t x = 0; x < kW; ++x) {
      const int64_t sy = y + dy, sx = (flip ? kW - 1 - x : x) + dx;
      for (int64_t k = 0; k < kC; ++k) {
        if (sy >= 0 && sy < kH && sx >= 0 && sx < kW) {
          out[static_cast<size_t>((y * kW + x) * kC + k)] = image[static_cast<size_t>((sy * kW + sx) * kC + k)];
        }
      }
    }
  }
  return out;
}

AugmentOptions Options(int64_t padding, bool flip) {
  return {.crop_padding = padding, .horizontal_flip = flip, .height = kH, .width = kW, .channels = kC, .seed = 7};
}

TEST(AugmentTest, EveryImageIsAShiftedCropAndEveryShiftAndFlipIsDrawn) {
  const int64_t p = 2;
  const std::vector<float> image = CountingImage();
  std::set<std::tuple<int64_t, int64_t, bool>> seen;
  for (int64_t position = 0; position < 400; ++position) {
    std::vector<float> out = image;
    AugmentImage(Options(p, true), 3, position, out);
    int matches = 0;
    for (int64_t dy = -p; dy <= p; ++dy) {
      for (int64_t dx = -p; dx <= p; ++dx) {
        for (bool flip : {false, true}) {
          if (out == Reference(image, dy, dx, flip)) {
            ++matches;
            seen.insert({dy, dx, flip});
          }
        }
      }
    }
    ASSERT_EQ(matches, 1) << "position " << position << ": not one shifted crop";
  }
  EXPECT_EQ(seen.size(), 5u * 5u * 2u) << "every shift, flipped and not";
}

TEST(AugmentTest, TheDrawsDependOnSeedEpochAndPositionOnly) {
  const std::vector<float> image = CountingImage();
  auto augmented = [&](uint64_t seed, int64_t epoch, int64_t position) {
    std::vector<float> out = image;
    AugmentOptions o = Options(2, true);
    o.seed = seed;
    AugmentImage(o, epoch, position, out);
    return out;
  };
  EXPECT_EQ(augmented(7, 1, 5), augmented(7, 1, 5));
  int differ_by_epoch = 0, differ_by_seed = 0;
  for (int64_t position = 0; position < 50; ++position) {
    differ_by_epoch += augmented(7, 1, position) != augmented(7, 2, position);
    differ_by_seed += augmented(7, 1, position) != augmented(8, 1, position);
  }
  EXPECT_GT(differ_by_epoch, 25);
  EXPECT_GT(differ_by_seed, 25);
  // Off: untouched.
  std::vector<float> out = image;
  AugmentImage(Options(0, false), 1, 1, out);
  EXPECT_EQ(out, image);
}

// A table of `n` counting images, row i's values offset by 1000 i.
LabelledTable ImageTable(int64_t n) {
  LabelledTable t;
  for (int64_t i = 0; i < kH * kW * kC; ++i) t.feature_names.push_back("p" + std::to_string(i));
  for (int64_t i = 0; i < n; ++i) {
    for (float v : CountingImage()) t.features.push_back(v + 1000.0f * static_cast<float>(i));
    t.labels.push_back(static_cast<int32_t>(i % 3));
  }
  return t;
}

std::vector<std::vector<float>> Epoch(BatchPipeline& p, int64_t epoch, int64_t skip = 0) {
  p.StartEpoch(epoch);
  p.Skip(skip);
  std::vector<std::vector<float>> batches;
  while (const Batch* b = p.Next()) {
    const auto features = b->features.data<float>();
    batches.emplace_back(features.begin(), features.end());
  }
  return batches;
}

TEST(AugmentTest, PipelineBatchesAreTheSameWhateverTheThreadsAndAfterASkip) {
  const LabelledTable t = ImageTable(23);
  std::vector<int64_t> rows(23);
  std::iota(rows.begin(), rows.end(), 0);
  const PipelineOptions base{.batch_size = 4, .shuffle_buffer = 100, .seed = 3, .augment = Options(1, true)};
  PipelineOptions one = base, three = base;
  one.prefetch = 0;
  three.prefetch = 4;
  three.threads = 3;
  BatchPipeline a(t, rows, one), b(t, rows, three);
  const auto epoch1 = Epoch(a, 1);
  EXPECT_EQ(epoch1, Epoch(b, 1));
  EXPECT_NE(epoch1, Epoch(a, 2)) << "another epoch, other draws";
  const auto resumed = Epoch(b, 1, 2);
  EXPECT_EQ(resumed, std::vector(epoch1.begin() + 2, epoch1.end()));
  // Augmented: some rows are not the table's.
  PipelineOptions plain = one;
  plain.augment = {};
  BatchPipeline c(t, rows, plain);
  EXPECT_NE(epoch1, Epoch(c, 1));
}

}  // namespace
}  // namespace lockstep::training
