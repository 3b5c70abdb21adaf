// Evaluating a model as its clients will meet it: held-out rows run through the serving graph
// (the exported signature "serving_default"), and the configured loss with the task's metrics
// computed from what it answers, by the definitions the training graph uses (model_graph.h).
#pragma once

#include <vector>

#include "runtime/session.h"
#include "runtime/status.h"
#include "training/config.h"
#include "training/data/dataset.h"

namespace lockstep::training {

struct Evaluation {
  double accuracy = 0, loss = 0;  // accuracy: classification
  double mse = 0, mae = 0;        // regression: over the rows and the target values
};

// `part`'s rows through `serving`'s default signature, in batches of up to 256. Appends the
// rows' features and the served probabilities (regression: outputs) to the vectors given.
StatusOr<Evaluation> Evaluate(const Session& serving, const TrainConfig& config, const Part& part,
                              std::vector<float>* features = nullptr, std::vector<float>* probabilities_out = nullptr);

}  // namespace lockstep::training
