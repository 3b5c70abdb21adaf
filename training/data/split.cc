#include "training/data/split.h"

#include <algorithm>
#include <cmath>

#include "training/random.h"

namespace lockstep::training {

RowSplit StratifiedSplit(std::span<const int32_t> labels, double held_out_fraction, uint64_t seed) {
  int32_t classes = 0;
  for (int32_t label : labels) classes = std::max(classes, label + 1);
  std::vector<std::vector<int64_t>> rows_of(static_cast<size_t>(classes));
  for (size_t i = 0; i < labels.size(); ++i)
    rows_of[static_cast<size_t>(labels[i])].push_back(static_cast<int64_t>(i));

  // One generator, used class by class in id order: the split depends on the seed alone.
  Random rng(seed);
  RowSplit split;
  for (std::vector<int64_t>& rows : rows_of) {
    Shuffle(std::span<int64_t>(rows), rng);
    const auto held = static_cast<size_t>(std::llround(held_out_fraction * static_cast<double>(rows.size())));
    split.held_out.insert(split.held_out.end(), rows.begin(),
                          rows.begin() + static_cast<std::ptrdiff_t>(held));
    split.train.insert(split.train.end(), rows.begin() + static_cast<std::ptrdiff_t>(held), rows.end());
  }
  std::sort(split.train.begin(), split.train.end());
  std::sort(split.held_out.begin(), split.held_out.end());
  return split;
}

}  // namespace lockstep::training
