#include "training/data/pipeline.h"

#include <algorithm>
#include <cstring>

#include "training/random.h"

namespace lockstep::training {

void ShuffleThroughBuffer(std::vector<int64_t>& items, int64_t buffer, uint64_t seed) {
  if (buffer <= 1 || items.size() <= 1) return;
  Random rng(seed);
  std::vector<int64_t> held;
  held.reserve(static_cast<size_t>(std::min<int64_t>(buffer, static_cast<int64_t>(items.size()))));
  std::vector<int64_t> out;
  out.reserve(items.size());
  size_t next = 0;
  while (static_cast<int64_t>(held.size()) < buffer && next < items.size()) held.push_back(items[next++]);
  while (!held.empty()) {
    const size_t pick = static_cast<size_t>(rng.Below(held.size()));
    out.push_back(held[pick]);
    if (next < items.size()) {
      held[pick] = items[next++];
    } else {
      held[pick] = held.back();
      held.pop_back();
    }
  }
  items = std::move(out);
}

uint64_t EpochShuffleSeed(uint64_t seed, int64_t epoch) {
  return seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(epoch + 1));
}

BatchPipeline::BatchPipeline(const LabelledTable& table, std::vector<int64_t> rows, PipelineOptions options)
    : table_(table),
      rows_(std::move(rows)),
      options_(options),
      ring_(options.batch_size, table.num_features(), table.num_targets(), options.prefetch, options.threads,
            [this](int64_t index, BatchBuffers& out) { return Assemble(index, out); }) {
  StartEpoch(0);
}

int64_t BatchPipeline::batches_per_epoch() const {
  const int64_t n = static_cast<int64_t>(rows_.size());
  const int64_t b = std::max<int64_t>(options_.batch_size, 1);
  return options_.drop_remainder ? n / b : (n + b - 1) / b;
}

Status BatchPipeline::Assemble(int64_t index, BatchBuffers& out) const {
  const int64_t b = std::max<int64_t>(options_.batch_size, 1);
  const int64_t f = table_.num_features();
  const int64_t t = table_.num_targets();
  const int64_t global = std::min<int64_t>(b, static_cast<int64_t>(order_.size()) - index * b);
  const int64_t shards = std::max(options_.shard_count, 1);
  const int64_t begin = index * b + global * options_.shard_index / shards;
  const int64_t count = index * b + global * (options_.shard_index + 1) / shards - begin;
  for (int64_t r = 0; r < count; ++r) {
    const int64_t row = order_[static_cast<size_t>(begin + r)];
    std::memcpy(out.features.data() + r * f, table_.row(row).data(), static_cast<size_t>(f) * sizeof(float));
    out.labels[static_cast<size_t>(r)] = table_.labels[static_cast<size_t>(row)];
    if (t > 0) std::memcpy(out.targets.data() + r * t, table_.target_row(row).data(), static_cast<size_t>(t) * sizeof(float));
  }
  out.rows = count;
  out.global_rows = global;
  out.global_begin = begin - index * b;
  AugmentBatch(options_.augment, epoch_, begin, out);
  return Status::Ok();
}

void BatchPipeline::StartEpoch(int64_t epoch) {
  ring_.Start(batches_per_epoch(), [&] {
    epoch_ = epoch;
    order_ = rows_;
    ShuffleThroughBuffer(order_, options_.shuffle_buffer, EpochShuffleSeed(options_.seed, epoch));
  });
}

}  // namespace lockstep::training
