// GradientStep: the training graph compiled once and run batch after batch, forward and
// backward, with every buffer made on the first run: its feeds point at the batch and the
// weights (the weights' own storage, so an optimiser updating them in place is seen by the
// next run), and its outputs (the loss, the logits, a gradient per weight) are written into
// the same tensors each time. A warmed-up step allocates nothing (tests/alloc/).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/session.h"
#include "training/data/feature_stats.h"
#include "training/data/pipeline.h"
#include "training/model_graph.h"
#include "training/optimizer.h"

namespace lockstep::training {

// What the training graph reads: `weights` (the float32 masters, shared, not copied) and,
// under precision bfloat16, the bf16 copy of each weight that takes one (TakesBf16Copy),
// rounded from the master's current values.
WeightMap TrainingWeights(const TrainConfig& config, const ModelLayout& layout, const WeightMap& weights);

// One Parameter per weight of the layout, in its order: the master's values and, when it has
// one, the bf16 copy the update refreshes. The gradients are the caller's to set.
std::vector<Parameter> TrainableParameters(const TrainConfig& config, const ModelLayout& layout,
                                           WeightMap& training_weights);

class GradientStep {
 public:
  // `weights` (TrainingWeights) must hold every weight the training graph reads and outlive
  // the step; so must `pool`, the intra-op threads (null: the default pool), and `batch_group`,
  // the replicas the batch is cut among (replica_batch_group.h; null: each run's batch is whole).
  static StatusOr<std::unique_ptr<GradientStep>> Create(const TrainConfig& config, const ModelLayout& layout,
                                                        const WeightMap& weights, const FeatureStats& stats,
                                                        ThreadPool* pool = nullptr, BatchGroup* batch_group = nullptr);

  // Forward and backward on `batch`; `dropout_seed` draws its dropout masks. `packs`: empty,
  // or one packing per pack site (PackSite), made from the weights as they are now, which
  // every product reading that weight then uses instead of packing it itself.
  Status Run(const Batch& batch, int64_t dropout_seed, std::span<const PackedB* const> packs = {});

  // The products of the training graph whose packed operand is a weight (the forward
  // product and the backward one of each dense kernel): a step with several replicas packs
  // each once for all of them (mirrored_step.h) rather than once per replica.
  size_t pack_sites() const { return site_weights_.size(); }
  // Packs site `site` from the weight's current values into `into`, on this step's pool.
  Status PackSite(size_t site, PackedB& into) const;

  // Of the last run: the batch's mean loss, how many of its rows the model got right
  // (classification), the sums over its rows and targets of the squared and absolute errors
  // (regression), and each weight's gradient (parallel to layout.weights; valid until the
  // next run).
  double loss() const { return loss_; }
  int64_t correct() const { return correct_; }
  double squared_error() const { return squared_error_; }
  double absolute_error() const { return absolute_error_; }
  std::span<const std::span<float>> gradients() const { return gradients_; }
  // The batch's statistic for each state of the layout (StateInfo), in its order.
  std::span<const std::span<const float>> batch_state() const { return batch_state_; }

  GradientStep(std::unique_ptr<Session> session, std::vector<NamedTensor> feed, const ModelLayout& layout,
               ThreadPool* pool);

 private:
  std::unique_ptr<Session> session_;
  ThreadPool* pool_;
  std::vector<size_t> site_weights_;  // per pack site: its weight's index in feed_
  std::vector<NamedTensor> feed_;  // features, labels or targets, [mean, std], weights..., [dropout seed]
  std::vector<NamedTensor> out_;   // loss, logits or predictions, gradients...
  std::vector<std::span<float>> gradients_;
  std::vector<std::span<const float>> batch_state_;
  size_t num_weights_;
  bool has_dropout_;
  int32_t classes_;  // the model's outputs: classes, or target values
  bool regression_;
  double loss_ = 0;
  int64_t correct_ = 0;
  double squared_error_ = 0, absolute_error_ = 0;
};

}  // namespace lockstep::training
