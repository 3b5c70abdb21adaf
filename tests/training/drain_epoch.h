// The pipelines' tests build data where row i has features (i, 10 i) and label i % 3, so that
// a batch shows which rows it holds. DrainEpoch reads the rest of an epoch that way.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "training/data/pipeline.h"

namespace lockstep::training::test {

// The row ids of each remaining batch of the epoch, checking every row's other fields and
// each batch's index (`first`: the index of the first batch Next gives).
inline std::vector<std::vector<int64_t>> DrainEpoch(BatchSource& p, int64_t first = 0) {
  std::vector<std::vector<int64_t>> batches;
  while (const Batch* b = p.Next()) {
    EXPECT_EQ(b->index, first + static_cast<int64_t>(batches.size()));
    EXPECT_EQ(b->features.shape(), (Shape{b->rows, 2}));
    EXPECT_EQ(b->labels.shape(), (Shape{b->rows}));
    std::vector<int64_t> rows;
    const auto f = b->features.data<float>();
    const auto l = b->labels.data<int32_t>();
    for (int64_t r = 0; r < b->rows; ++r) {
      const auto row = static_cast<int64_t>(f[static_cast<size_t>(2 * r)]);
      EXPECT_EQ(f[static_cast<size_t>(2 * r + 1)], static_cast<float>(10 * row));
      EXPECT_EQ(l[static_cast<size_t>(r)], row % 3);
      rows.push_back(row);
    }
    batches.push_back(rows);
  }
  EXPECT_TRUE(p.status().ok()) << p.status().ToString();
  return batches;
}

}  // namespace lockstep::training::test
