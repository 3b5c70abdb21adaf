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

BatchPipeline::BatchPipeline(const LabelledTable& table, std::vector<int64_t> rows, PipelineOptions options)
    : table_(table), rows_(std::move(rows)), options_(options) {
  const int64_t b = std::max<int64_t>(options_.batch_size, 1);
  const int64_t f = table_.num_features();
  slots_.resize(static_cast<size_t>(std::max(options_.prefetch, 0) + 1));
  for (Slot& slot : slots_) {
    slot.features.resize(static_cast<size_t>(b * f));
    slot.labels.resize(static_cast<size_t>(b));
  }
  StartEpoch(0);
  if (options_.prefetch > 0) {
    for (int t = 0; t < std::max(options_.threads, 1); ++t) producers_.emplace_back([this] { Produce(); });
  }
}

BatchPipeline::~BatchPipeline() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  for (std::thread& t : producers_) t.join();
}

int64_t BatchPipeline::batches_per_epoch() const {
  const int64_t n = static_cast<int64_t>(rows_.size());
  const int64_t b = std::max<int64_t>(options_.batch_size, 1);
  return options_.drop_remainder ? n / b : (n + b - 1) / b;
}

void BatchPipeline::Assemble(int64_t index, Slot& slot) const {
  const int64_t b = std::max<int64_t>(options_.batch_size, 1);
  const int64_t f = table_.num_features();
  const int64_t global = std::min<int64_t>(b, static_cast<int64_t>(order_.size()) - index * b);
  const int64_t shards = std::max(options_.shard_count, 1);
  const int64_t begin = index * b + global * options_.shard_index / shards;
  const int64_t count = index * b + global * (options_.shard_index + 1) / shards - begin;
  for (int64_t r = 0; r < count; ++r) {
    const int64_t row = order_[static_cast<size_t>(begin + r)];
    std::memcpy(slot.features.data() + r * f, table_.row(row).data(), static_cast<size_t>(f) * sizeof(float));
    slot.labels[static_cast<size_t>(r)] = table_.labels[static_cast<size_t>(row)];
  }
  Batch& batch = slot.batch;
  if (batch.rows != count || batch.features.num_elements() != count * f) {
    // A view over the slot's buffers; rebuilt only when the row count changes (an epoch's
    // last batch), since a Tensor view is cheap but not free.
    batch.features = Tensor::MutableView(DType::kFloat32, Shape{count, f}, slot.features.data(), nullptr);
    batch.labels = Tensor::MutableView(DType::kInt32, Shape{count}, slot.labels.data(), nullptr);
  }
  batch.rows = count;
  batch.index = index;
  batch.global_rows = global;
}

void BatchPipeline::Produce() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    const auto depth = static_cast<int64_t>(slots_.size());
    // A batch may be assembled once the one that last used its slot has been handed out and
    // given back (the trainer holds batch next_to_hand_ - 1 until its next call).
    work_.wait(lock, [&] {
      return stopping_ || (next_to_make_ < end_ && next_to_make_ < next_to_hand_ - 1 + depth);
    });
    if (stopping_) return;
    const int64_t index = next_to_make_++;
    Slot& slot = slots_[static_cast<size_t>(index % depth)];
    ++in_flight_;
    lock.unlock();
    Assemble(index, slot);
    lock.lock();
    slot.ready = index;
    --in_flight_;
    ready_.notify_all();
  }
}

void BatchPipeline::Quiesce(std::unique_lock<std::mutex>& lock) {
  end_ = next_to_make_;  // nothing new is claimed
  ready_.wait(lock, [&] { return in_flight_ == 0; });
}

void BatchPipeline::StartEpoch(int64_t epoch) {
  std::unique_lock<std::mutex> lock(mu_);
  Quiesce(lock);
  order_ = rows_;
  ShuffleThroughBuffer(order_, options_.shuffle_buffer,
                       options_.seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(epoch + 1)));
  for (Slot& slot : slots_) slot.ready = -1;
  next_to_make_ = 0;
  next_to_hand_ = 0;
  end_ = batches_per_epoch();
  lock.unlock();
  work_.notify_all();
}

void BatchPipeline::Skip(int64_t count) {
  std::unique_lock<std::mutex> lock(mu_);
  Quiesce(lock);
  next_to_hand_ = std::min(next_to_hand_ + count, batches_per_epoch());
  next_to_make_ = next_to_hand_;  // batches made ahead are dropped with their slots
  for (Slot& slot : slots_) slot.ready = -1;
  end_ = batches_per_epoch();
  lock.unlock();
  work_.notify_all();
}

const Batch* BatchPipeline::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (next_to_hand_ >= batches_per_epoch()) return nullptr;
  const int64_t index = next_to_hand_++;
  Slot& slot = slots_[static_cast<size_t>(index % static_cast<int64_t>(slots_.size()))];
  if (producers_.empty()) {
    Assemble(index, slot);
    return &slot.batch;
  }
  work_.notify_all();  // the previous batch's slot is free again
  ready_.wait(lock, [&] { return slot.ready == index; });
  return &slot.batch;
}

}  // namespace lockstep::training
