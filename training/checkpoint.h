// Checkpoints: everything a run needs to continue as if it had never stopped. The weights,
// the optimiser's state and step count, the position in the data (epoch, batches done; the
// pipeline's order and the dropout masks follow from the seed, the epoch and the step), and
// the best epoch so far when the export keeps the best one. One file per checkpoint,
// <dir>/checkpoint-<step>.ckpt, written to a temporary name and renamed into place, so a
// reader only ever sees complete ones; a CRC-32C over the contents catches damage.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/status.h"

namespace lockstep::training {

struct Checkpoint {
  int64_t step = 0;          // optimiser steps taken
  int64_t epoch = 0;         // the epoch in progress (0-based)
  int64_t batches_done = 0;  // batches of that epoch already trained on
  std::map<std::string, std::vector<float>> weights;
  // Per weight, the optimiser's state vectors (momentum: 1, adam: 2, sgd: none).
  std::map<std::string, std::vector<std::vector<float>>> optimizer_state;
  // With export.best_by: the best validation metric so far (higher is better) and the weights
  // that reached it. Unset and empty otherwise.
  std::optional<double> best_metric;
  std::map<std::string, std::vector<float>> best_weights;
};

// Writes `checkpoint` into `dir` (created if missing) and then deletes all but the newest
// `keep` checkpoints there. Returns the new file's path.
StatusOr<std::string> WriteCheckpoint(const std::string& dir, const Checkpoint& checkpoint, int keep);

// The newest complete, intact checkpoint in `dir`; NotFound when there is none. A damaged
// file is an error that names it (never silently skipped: resuming from an older one would
// repeat steps unnoticed).
StatusOr<Checkpoint> ReadLatestCheckpoint(const std::string& dir);

}  // namespace lockstep::training
