#include "training/gradient_step.h"

#include <algorithm>
#include <cmath>

namespace lockstep::training {

WeightMap TrainingWeights(const TrainConfig& config, const ModelLayout& layout, const WeightMap& weights) {
  WeightMap result = weights;
  for (const WeightInfo& w : layout.weights) {
    if (!TakesBf16Copy(config, w)) continue;
    Tensor copy(DType::kBFloat16, w.shape);
    FloatToBfloat16(weights.at(w.name).data<float>(), copy.mutable_data<bfloat16>());
    result[Bf16CopyName(w.name)] = std::move(copy);
  }
  return result;
}

std::vector<Parameter> TrainableParameters(const TrainConfig& config, const ModelLayout& layout,
                                           WeightMap& training_weights) {
  std::vector<Parameter> params;
  for (const WeightInfo& w : layout.weights) {
    Parameter p;
    p.value = training_weights.at(w.name).mutable_data<float>();
    if (TakesBf16Copy(config, w))
      p.bf16_value = training_weights.at(Bf16CopyName(w.name)).mutable_data<bfloat16>();
    params.push_back(p);
  }
  return params;
}

StatusOr<std::unique_ptr<GradientStep>> GradientStep::Create(const TrainConfig& config,
                                                             const ModelLayout& layout,
                                                             const WeightMap& weights,
                                                             const FeatureStats& stats, ThreadPool* pool,
                                                             BatchGroup* batch_group) {
  LS_ASSIGN_OR_RETURN(Model graph, BuildTrainingGraph(config, layout));
  SessionOptions options;
  options.pool = pool;
  options.batch_group = batch_group;
  for (const WeightInfo& w : layout.weights) {
    options.packed_by_caller.push_back(TakesBf16Copy(config, w) ? Bf16CopyName(w.name) : w.name);
  }
  LS_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(std::move(graph), options));
  const int64_t f = layout.num_features;
  std::vector<NamedTensor> feed = {{kFeaturesInput, {}}, {layout.regression ? kTargetsInput : kLabelsInput, {}}};
  if (config.model.normalize) {
    feed.push_back({kMeanInput, Tensor::FromVector<float>(Shape{f}, stats.mean)});
    feed.push_back({kStdInput, Tensor::FromVector<float>(Shape{f}, stats.std)});
  }
  for (const WeightInfo& w : layout.weights) {
    const std::string name = TakesBf16Copy(config, w) ? Bf16CopyName(w.name) : w.name;
    auto it = weights.find(name);
    if (it == weights.end()) return InvalidArgument("no weight '" + name + "' for the training graph");
    feed.push_back({name, it->second});
  }
  if (layout.has_dropout) feed.push_back({kDropoutSeedInput, Tensor::Scalar<int64_t>(0)});
  return std::make_unique<GradientStep>(std::move(session), std::move(feed), layout, pool);
}

GradientStep::GradientStep(std::unique_ptr<Session> session, std::vector<NamedTensor> feed, const ModelLayout& layout,
                           ThreadPool* pool)
    : session_(std::move(session)),
      pool_(pool),
      feed_(std::move(feed)),
      num_weights_(layout.weights.size()),
      has_dropout_(layout.has_dropout),
      classes_(layout.num_classes),
      regression_(layout.regression) {
  for (const std::string& input : session_->PackSites(kTrainSignature)) {
    for (size_t i = 0; i < feed_.size(); ++i) {
      if (feed_[i].name == input) site_weights_.push_back(i);
    }
  }
}

Status GradientStep::PackSite(size_t site, PackedB& into) const {
  return session_->PackSite(kTrainSignature, site, feed_[site_weights_[site]].tensor, into, pool_);
}

Status GradientStep::Run(const Batch& batch, int64_t dropout_seed, std::span<const PackedB* const> packs) {
  feed_[0].tensor = batch.features;
  feed_[1].tensor = regression_ ? batch.targets : batch.labels;
  if (has_dropout_) feed_.back().tensor.mutable_data<int64_t>()[0] = dropout_seed;
  LS_RETURN_IF_ERROR(session_->Run(kTrainSignature, feed_, &out_, packs));
  loss_ = out_[0].tensor.data<float>()[0];
  const auto outputs = out_[1].tensor.data<float>();
  correct_ = 0;
  squared_error_ = absolute_error_ = 0;
  if (regression_) {
    const auto targets = batch.targets.data<float>();
    for (size_t i = 0; i < static_cast<size_t>(batch.rows * classes_); ++i) {
      const double e = static_cast<double>(outputs[i]) - targets[i];
      squared_error_ += e * e;
      absolute_error_ += std::abs(e);
    }
  } else {
    const auto labels = batch.labels.data<int32_t>();
    for (int64_t r = 0; r < batch.rows; ++r) {
      const float* row = outputs.data() + r * classes_;
      correct_ += std::max_element(row, row + classes_) - row == labels[static_cast<size_t>(r)];
    }
  }
  gradients_.resize(num_weights_);
  for (size_t i = 0; i < gradients_.size(); ++i) gradients_[i] = out_[2 + i].tensor.mutable_data<float>();
  batch_state_.resize(out_.size() - 2 - num_weights_);
  for (size_t i = 0; i < batch_state_.size(); ++i) batch_state_[i] = out_[2 + num_weights_ + i].tensor.data<float>();
  return Status::Ok();
}

}  // namespace lockstep::training
