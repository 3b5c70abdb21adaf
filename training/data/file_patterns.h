// File patterns in data.train, data.validation and data.test ("shards/train-*.tfrecord"), as
// tf.data's list_files takes them: shell wildcards (*, ?, [...]) expanded in sorted order, so
// that every process of a run sees the same list in the same order.
#pragma once

#include <string>
#include <vector>

#include "runtime/status.h"

namespace lockstep::training {

// Each entry as it is when it has no wildcard or names a file as it is ("data[1].csv"), else
// the files it matches (sorted; directories
// left out). A pattern that matches no file is an error naming it; a file listed twice (by two
// patterns) is an error too, since it would be read twice an epoch.
StatusOr<std::vector<std::string>> ExpandFilePatterns(const std::vector<std::string>& entries);

}  // namespace lockstep::training
