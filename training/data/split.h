// Splitting a labelled table's rows into a training and a held-out part.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace lockstep::training {

struct RowSplit {
  std::vector<int64_t> train;  // row indices, ascending
  std::vector<int64_t> held_out;
};

// Stratified: each class gives round(held_out_fraction * its row count) of its rows, chosen
// at random by `seed`, to the held-out part, so both parts keep the classes' proportions.
// Deterministic for a seed, on every platform. held_out_fraction is in [0, 1].
RowSplit StratifiedSplit(std::span<const int32_t> labels, double held_out_fraction, uint64_t seed);

}  // namespace lockstep::training
