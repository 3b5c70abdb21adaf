// BatchGroup: one batch cut among replicas that run the same graph in lockstep (a trainer's
// mirrored strategy, in threads or in processes), as the few ops that need statistics of the
// whole batch see it (BatchNormTraining and its gradient). Each replica's session holds its own
// member of the group (SessionOptions::batch_group); an op with no group sees its input as the
// whole batch.
//
// The sums are taken row by row in the batch's order, whoever holds the rows, so they come out
// the same bits however the batch was cut: one replica, two, or two processes of two.
#pragma once

#include <cstdint>
#include <span>

#include "runtime/status.h"

namespace lockstep {

class BatchGroup {
 public:
  virtual ~BatchGroup() = default;
  // The rows of the whole batch, this replica's included.
  virtual int64_t global_rows() const = 0;
  // Every replica of the group calls this at the same point of its run, with its own rows:
  // `local` holds rows x `width` values, rows = its share of the batch. Writes to `sums`
  // (`width` values) the sum over every row of the batch, taken in the batch's order.
  virtual Status SumRows(std::span<const double> local, int64_t width, std::span<double> sums) = 0;
};

// What an op with no group does: the sum over `local`'s rows, in order.
inline void SumRowsInOrder(std::span<const double> local, int64_t width, std::span<double> sums) {
  const auto w = static_cast<size_t>(width);
  for (size_t c = 0; c < w; ++c) sums[c] = 0;
  for (size_t r = 0; r * w < local.size(); ++r) {
    for (size_t c = 0; c < w; ++c) sums[c] += local[r * w + c];
  }
}

}  // namespace lockstep
