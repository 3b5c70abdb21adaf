#include "training/progress_bar.h"

#include <gtest/gtest.h>

#include <string>

namespace lockstep::training {
namespace {

TEST(ProgressBarTest, RendersTheEpochBarLossSpeedAndEta) {
  Progress p{.epoch = 3,
             .epochs = 30,
             .batch = 10,
             .batches = 40,
             .loss = 0.12345,
             .samples_per_second = 48210.4,
             .eta_seconds = 0.44};
  EXPECT_EQ(RenderProgress(p, 20),
            "epoch 3/30 [=====>              ] 10/40  loss 0.1235  48210 samples/s  eta 0.4 s");
  p.batch = 40;
  EXPECT_EQ(RenderProgress(p, 8).substr(0, 24), "epoch 3/30 [========] 40");
  p.batch = 0;
  EXPECT_EQ(RenderProgress(p, 4).substr(0, 18), "epoch 3/30 [    ] ");
}

std::string Contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
  return s;
}

TEST(ProgressBarTest, DrawsInPlaceAtMostTenTimesASecondAndClears) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(f, true);
    Progress p{.epoch = 1, .epochs = 1, .batch = 1, .batches = 3};
    bar.Update(p);
    p.batch = 2;
    bar.Update(p);  // within 100 ms of the last: skipped
    p.batch = 3;
    bar.Update(p);  // the last batch always draws
  }                 // cleared on destruction
  const std::string out = Contents(f);
  EXPECT_TRUE(out.starts_with("\repoch 1/1 [======>             ] 1/3")) << out;
  EXPECT_EQ(out.find("2/3"), std::string::npos) << out;
  EXPECT_NE(out.find("3/3"), std::string::npos) << out;
  EXPECT_TRUE(out.ends_with("\r\x1b[K")) << out;
  std::fclose(f);

  // Not a terminal: nothing at all.
  f = std::tmpfile();
  {
    ProgressBar bar(f, false);
    bar.Update({.epoch = 1, .epochs = 1, .batch = 1, .batches = 1});
  }
  EXPECT_EQ(Contents(f), "");
  std::fclose(f);
}

}  // namespace
}  // namespace lockstep::training
