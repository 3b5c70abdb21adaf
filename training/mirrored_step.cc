#include "training/mirrored_step.h"

#include "training/vector_isa.h"

namespace lockstep::training {

namespace {

// out[e] = share * g[e] (`first`) or out[e] += share * g[e], for e in [begin, end): the
// reduction streams every gradient once per step, so it is compiled for AVX-512, AVX2 and the
// baseline (vector_isa.h), each giving the same bits.
[[gnu::always_inline]] inline void AddWeightedLoop(float* __restrict out, const float* __restrict g,
                                                   float share, int64_t begin, int64_t end, bool first) {
  if (first) {
    for (int64_t e = begin; e < end; ++e) out[e] = share * g[e];
  } else {
    for (int64_t e = begin; e < end; ++e) out[e] += share * g[e];
  }
}
__attribute__((target("avx512f"))) void AddWeightedAvx512(float* out, const float* g, float share,
                                                          int64_t begin, int64_t end, bool first) {
  AddWeightedLoop(out, g, share, begin, end, first);
}
__attribute__((target("avx2"))) void AddWeightedAvx2(float* out, const float* g, float share, int64_t begin,
                                                     int64_t end, bool first) {
  AddWeightedLoop(out, g, share, begin, end, first);
}
void AddWeighted(float* out, const float* g, float share, int64_t begin, int64_t end, bool first) {
  switch (DetectVectorIsa()) {
    case VectorIsa::kAvx512:
      return AddWeightedAvx512(out, g, share, begin, end, first);
    case VectorIsa::kAvx2:
      return AddWeightedAvx2(out, g, share, begin, end, first);
    case VectorIsa::kBaseline:
      return AddWeightedLoop(out, g, share, begin, end, first);
  }
}

}  // namespace

struct MirroredStep::Replica {
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<GradientStep> step;
  int64_t begin = 0, rows = 0;  // this step's shard of the batch
  // Its packing of this step's pack sites: written before the packed_ barrier, read by every
  // replica after it, never written again before the step's computed_ barrier.
  Status pack_status;
  Status status;
};

StatusOr<std::unique_ptr<MirroredStep>> MirroredStep::Create(const TrainConfig& config,
                                                             const ModelLayout& layout,
                                                             const WeightMap& weights,
                                                             const FeatureStats& stats, Options options) {
  if (options.replicas < 1)
    return InvalidArgument("replicas: must be >= 1, got " + std::to_string(options.replicas));
  std::unique_ptr<ReplicaBatchGroup> group;
  if (!layout.state.empty() && (options.replicas > 1 || options.multi_worker)) {
    group = std::make_unique<ReplicaBatchGroup>(options.replicas, options.workers);
  }
  std::vector<std::unique_ptr<Replica>> replicas;
  for (int r = 0; r < options.replicas; ++r) {
    auto replica = std::make_unique<Replica>();
    replica->pool = std::make_unique<ThreadPool>(std::max(1, options.threads_per_replica));
    LS_ASSIGN_OR_RETURN(replica->step, GradientStep::Create(config, layout, weights, stats, replica->pool.get(),
                                                            group != nullptr ? group->member(r) : nullptr));
    replicas.push_back(std::move(replica));
  }
  return std::make_unique<MirroredStep>(std::move(replicas), std::move(group), layout, options);
}

MirroredStep::MirroredStep(std::vector<std::unique_ptr<Replica>> replicas, std::unique_ptr<ReplicaBatchGroup> group,
                           const ModelLayout& layout, const Options& options)
    : group_(std::move(group)),
      replicas_(std::move(replicas)),
      shard_begins_(replicas_.size()),
      shard_rows_(replicas_.size()),
      first_replica_(options.first_replica),
      multi_worker_(options.multi_worker) {
  const int n = static_cast<int>(replicas_.size());
  if (n > 1 || options.multi_worker) {
    size_t total = 0;
    for (const WeightInfo& w : layout.weights) total += static_cast<size_t>(w.shape.num_elements());
    flat_.resize(total);
    size_t offset = 0;
    for (const WeightInfo& w : layout.weights) {
      const auto len = static_cast<size_t>(w.shape.num_elements());
      reduced_.push_back(std::span<float>(flat_).subspan(offset, len));
      offset += len;
    }
    gradients_ = reduced_;
  }
  // One replica packs for itself as it goes; several share each packing.
  if (n > 1) {
    packs_.resize(replicas_[0]->step->pack_sites());
    for (const PackedB& p : packs_) pack_ptrs_.push_back(&p);
  }
  start_ = std::make_unique<SpinBarrier>(n);
  packed_ = std::make_unique<SpinBarrier>(n);
  computed_ = std::make_unique<SpinBarrier>(n);
  reduced_barrier_ = std::make_unique<SpinBarrier>(n);
  for (int r = 1; r < n; ++r) threads_.emplace_back([this, r] { ReplicaLoop(r); });
}

MirroredStep::~MirroredStep() {
  stopping_.store(true);
  if (!threads_.empty()) start_->Wait();  // releases the replica threads, which see stopping_
  for (std::thread& t : threads_) t.join();
}

void MirroredStep::ReplicaLoop(int r) {
  for (;;) {
    start_->Wait();
    if (stopping_.load()) return;
    RunReplica(r);
  }
}

void MirroredStep::RunReplica(int r) {
  Replica& replica = *replicas_[static_cast<size_t>(r)];
  const Batch& batch = *batch_;
  replica.status = Status::Ok();
  const auto n = static_cast<int64_t>(replicas_.size());
  Status packed_all;
  if (!packs_.empty()) {
    // Every site is packed (from the weights as the last update left them) before any
    // replica reads one; the sites are identical in every replica's session.
    replica.pack_status = Status::Ok();
    for (size_t s = static_cast<size_t>(r); s < packs_.size() && replica.pack_status.ok(); s += static_cast<size_t>(n)) {
      replica.pack_status = replica.step->PackSite(s, packs_[s]);
    }
    packed_->Wait();
    for (const auto& q : replicas_) {
      if (!q->pack_status.ok() && packed_all.ok()) packed_all = q->pack_status;
    }
  }
  replica.status = packed_all;
  if (replica.rows > 0 && packed_all.ok()) {
    Batch shard{batch.features.Rows(replica.begin, replica.rows), batch.labels.Rows(replica.begin, replica.rows),
                batch.targets.num_elements() > 0 ? batch.targets.Rows(replica.begin, replica.rows) : Tensor(),
                replica.rows, batch.index, replica.rows};
    // Each replica its own masks: the stream of a layer's mask restarts at every shard.
    replica.status = replica.step->Run(shard, dropout_seed_ + first_replica_ + r, pack_ptrs_);
    // The others may be waiting for it in a batch_norm's sum.
    if (!replica.status.ok() && group_ != nullptr) group_->Cancel();
  }
  if (flat_.empty()) return;  // one replica, one worker: its gradients are the batch's
  if (n > 1) computed_->Wait();
  // A failed step reduces nothing: Run reports the failure, and nothing must be updated.
  for (const auto& q : replicas_) {
    if (!q->status.ok()) {
      if (n > 1) reduced_barrier_->Wait();
      return;
    }
  }
  // Replica r reduces slice r of every gradient: element e is the sum over the replicas, in
  // replica order, of each one's gradient weighted by its share of the global batch. In
  // stretches that stay in L1, each handed to on_reduced_ at once.
  constexpr int64_t kStretch = 4096;
  for (size_t i = 0; i < reduced_.size(); ++i) {
    const auto len = static_cast<int64_t>(reduced_[i].size());
    const int64_t lo = len * r / n, hi = len * (r + 1) / n;
    float* out = reduced_[i].data();
    for (int64_t begin = lo; begin < hi; begin += kStretch) {
      const int64_t end = std::min(hi, begin + kStretch);
      bool first = true;  // the first term is stored, not added to a zero (the same bits, one pass less)
      for (const auto& q : replicas_) {
        if (q->rows == 0) continue;
        const float share =
            static_cast<float>(static_cast<double>(q->rows) / static_cast<double>(total_rows_));
        AddWeighted(out, q->step->gradients()[i].data(), share, begin, end, first);
        first = false;
      }
      if (first) std::fill(out + begin, out + end, 0.0f);  // no replica had rows
      if (on_reduced_ != nullptr) (*on_reduced_)(i, begin, end);
    }
  }
  if (n > 1) reduced_barrier_->Wait();
}

std::span<const std::span<const float>> MirroredStep::batch_state() const {
  for (const auto& replica : replicas_) {
    if (replica->rows > 0) return replica->step->batch_state();
  }
  return {};
}

Status MirroredStep::Run(const Batch& batch, int64_t dropout_seed, const ReducedFn* on_reduced) {
  const auto n = static_cast<int64_t>(replicas_.size());
  if (on_reduced != nullptr && !reduces_locally()) {
    return FailedPrecondition(
        "MirroredStep: an update during the reduction needs a step that reduces locally");
  }
  on_reduced_ = on_reduced;
  for (int64_t r = 0; r < n; ++r) {
    Replica& replica = *replicas_[static_cast<size_t>(r)];
    replica.begin = batch.rows * r / n;
    replica.rows = batch.rows * (r + 1) / n - replica.begin;
  }
  batch_ = &batch;
  total_rows_ = batch.global_rows > 0 ? batch.global_rows : batch.rows;
  dropout_seed_ = dropout_seed;
  if (group_ != nullptr) {
    for (size_t r = 0; r < replicas_.size(); ++r) {
      shard_begins_[r] = replicas_[r]->begin;
      shard_rows_[r] = replicas_[r]->rows;
    }
    // A worker without rows would leave the others waiting in the batch's statistics.
    if (batch.rows == 0) {
      return FailedPrecondition("batch_norm: batch " + std::to_string(batch.index) + " has " +
                                std::to_string(total_rows_) +
                                " rows, none for this worker; every worker must have rows of every batch for its "
                                "statistics (set drop_remainder, or a batch_size that leaves a last batch of at "
                                "least one row per worker)");
    }
    group_->StartStep(total_rows_, batch.global_begin, shard_begins_, shard_rows_);
  }
  if (n > 1) start_->Wait();
  RunReplica(0);
  loss_ = 0;
  correct_ = 0;
  squared_error_ = absolute_error_ = 0;
  for (const auto& replica : replicas_) {
    LS_RETURN_IF_ERROR(replica->status);
    if (replica->rows == 0) continue;
    loss_ += replica->step->loss() * static_cast<double>(replica->rows) / static_cast<double>(total_rows_);
    correct_ += replica->step->correct();
    squared_error_ += replica->step->squared_error();
    absolute_error_ += replica->step->absolute_error();
  }
  if (flat_.empty()) {
    gradients_.assign(replicas_[0]->step->gradients().begin(), replicas_[0]->step->gradients().end());
  }
  return Status::Ok();
}

}  // namespace lockstep::training
