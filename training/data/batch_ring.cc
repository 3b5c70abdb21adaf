#include "training/data/batch_ring.h"

#include <algorithm>

namespace lockstep::training {

BatchRing::BatchRing(int64_t batch_size, int64_t num_features, int64_t num_targets, int prefetch, int threads,
                     AssembleFn assemble)
    : num_features_(num_features), num_targets_(num_targets), assemble_(std::move(assemble)) {
  const int64_t b = std::max<int64_t>(batch_size, 1);
  slots_.resize(static_cast<size_t>(std::max(prefetch, 0) + 1));
  for (Slot& slot : slots_) {
    slot.features.resize(static_cast<size_t>(b * num_features));
    slot.labels.resize(static_cast<size_t>(b));
    slot.targets.resize(static_cast<size_t>(b * num_targets));
  }
  if (prefetch > 0) {
    for (int t = 0; t < std::max(threads, 1); ++t) producers_.emplace_back([this] { Produce(); });
  }
}

BatchRing::~BatchRing() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  for (std::thread& t : producers_) t.join();
}

Status BatchRing::Fill(int64_t index, Slot& slot) {
  BatchBuffers buffers{slot.features, slot.labels, slot.targets, 0, 0};
  LS_RETURN_IF_ERROR(assemble_(index, buffers));
  const int64_t rows = buffers.rows;
  Batch& batch = slot.batch;
  if (batch.rows != rows || batch.features.num_elements() != rows * num_features_) {
    // A view over the slot's buffers; rebuilt only when the row count changes (an epoch's
    // last batch), since a Tensor view is cheap but not free.
    batch.features = Tensor::MutableView(DType::kFloat32, Shape{rows, num_features_}, slot.features.data(), nullptr);
    batch.labels = Tensor::MutableView(DType::kInt32, Shape{rows}, slot.labels.data(), nullptr);
    if (num_targets_ > 0) {
      batch.targets = Tensor::MutableView(DType::kFloat32, Shape{rows, num_targets_}, slot.targets.data(), nullptr);
    }
  }
  batch.rows = rows;
  batch.index = index;
  batch.global_rows = buffers.global_rows;
  batch.global_begin = buffers.global_begin;
  return Status::Ok();
}

void BatchRing::Produce() {
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
    Status s = Fill(index, slot);
    lock.lock();
    if (s.ok()) {
      slot.ready = index;
    } else {
      Fail(index, std::move(s));
    }
    --in_flight_;
    ready_.notify_all();
  }
}

void BatchRing::Fail(int64_t index, Status status) {
  if (index < failed_at_) {
    failed_at_ = index;
    status_ = std::move(status);
  }
  end_ = std::min(end_, next_to_make_);  // nothing new is claimed
}

void BatchRing::Quiesce(std::unique_lock<std::mutex>& lock) {
  end_ = next_to_make_;  // nothing new is claimed
  ready_.wait(lock, [&] { return in_flight_ == 0; });
}

void BatchRing::Start(int64_t batches, const std::function<void()>& reset) {
  std::unique_lock<std::mutex> lock(mu_);
  Quiesce(lock);
  reset();
  for (Slot& slot : slots_) slot.ready = -1;
  batches_ = batches;
  next_to_make_ = 0;
  next_to_hand_ = 0;
  end_ = batches;
  status_ = Status::Ok();
  failed_at_ = INT64_MAX;
  lock.unlock();
  work_.notify_all();
}

void BatchRing::Skip(int64_t count) {
  std::unique_lock<std::mutex> lock(mu_);
  Quiesce(lock);
  next_to_hand_ = std::min(next_to_hand_ + count, batches_);
  next_to_make_ = next_to_hand_;  // batches made ahead are dropped with their slots
  for (Slot& slot : slots_) slot.ready = -1;
  // Batches made ahead are dropped, a failed one with them: each is made again when its turn
  // comes (and fails again, if it must).
  status_ = Status::Ok();
  failed_at_ = INT64_MAX;
  end_ = batches_;
  lock.unlock();
  work_.notify_all();
}

const Batch* BatchRing::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (next_to_hand_ >= batches_ || next_to_hand_ >= failed_at_) return nullptr;
  const int64_t index = next_to_hand_++;
  Slot& slot = slots_[static_cast<size_t>(index % static_cast<int64_t>(slots_.size()))];
  if (producers_.empty()) {
    if (Status s = Fill(index, slot); !s.ok()) {
      Fail(index, std::move(s));
      return nullptr;
    }
    return &slot.batch;
  }
  work_.notify_all();  // the previous batch's slot is free again
  ready_.wait(lock, [&] { return slot.ready == index || index >= failed_at_; });
  return slot.ready == index ? &slot.batch : nullptr;
}

Status BatchRing::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

}  // namespace lockstep::training
