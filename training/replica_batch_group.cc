#include "training/replica_batch_group.h"

#include <algorithm>

namespace lockstep::training {

class ReplicaBatchGroup::Member final : public BatchGroup {
 public:
  Member(ReplicaBatchGroup& group, int replica) : group_(group), replica_(replica) {}
  int64_t global_rows() const override { return group_.global_rows_; }
  Status SumRows(std::span<const double> local, int64_t width, std::span<double> sums) override {
    return group_.SumRows(replica_, local, width, sums);
  }

 private:
  ReplicaBatchGroup& group_;
  const int replica_;
};

ReplicaBatchGroup::ReplicaBatchGroup(int replicas, Workers* workers)
    : workers_(workers != nullptr && workers->size() > 1 ? workers : nullptr),
      handed_in_(static_cast<size_t>(replicas)),
      begins_(static_cast<size_t>(replicas)),
      rows_(static_cast<size_t>(replicas)) {
  for (int r = 0; r < replicas; ++r) members_.push_back(std::make_unique<Member>(*this, r));
}

ReplicaBatchGroup::~ReplicaBatchGroup() = default;

BatchGroup* ReplicaBatchGroup::member(int r) {
  return members_[static_cast<size_t>(r)].get();
}

void ReplicaBatchGroup::StartStep(int64_t global_rows, int64_t worker_begin, std::span<const int64_t> begins,
                                  std::span<const int64_t> rows) {
  global_rows_ = global_rows;
  worker_begin_ = worker_begin;
  std::copy(begins.begin(), begins.end(), begins_.begin());
  std::copy(rows.begin(), rows.end(), rows_.begin());
  int active = 0;
  first_ = -1;
  for (size_t r = 0; r < rows_.size(); ++r) {
    if (rows_[r] == 0) continue;
    if (first_ < 0) first_ = static_cast<int>(r);
    ++active;
  }
  in_.set_parties(std::max(active, 1));
  out_.set_parties(std::max(active, 1));
  in_.Reset();
  out_.Reset();
}

void ReplicaBatchGroup::Cancel() {
  in_.Cancel();
  out_.Cancel();
}

Status ReplicaBatchGroup::SumRows(int r, std::span<const double> local, int64_t width, std::span<double> sums) {
  const auto w = static_cast<size_t>(width);
  handed_in_[static_cast<size_t>(r)] = local;
  if (!in_.Wait()) return Status(StatusCode::kAborted, "another replica's step failed");
  if (r == first_) {
    status_ = Status::Ok();
    sums_.assign(w, 0.0);  // grows once: the widest layer's
    if (workers_ == nullptr) {
      // The replicas' shards follow one another in the batch: their rows in replica order are
      // the batch's.
      for (size_t q = 0; q < handed_in_.size(); ++q) {
        if (rows_[q] == 0) continue;
        const std::span<const double> rows = handed_in_[q];
        for (size_t i = 0; i < rows.size(); i += w) {
          for (size_t c = 0; c < w; ++c) sums_[c] += rows[i + c];
        }
      }
    } else {
      global_.assign(static_cast<size_t>(global_rows_) * w, 0.0);
      for (size_t q = 0; q < handed_in_.size(); ++q) {
        if (rows_[q] == 0) continue;
        std::copy(handed_in_[q].begin(), handed_in_[q].end(),
                  global_.begin() + static_cast<std::ptrdiff_t>((worker_begin_ + begins_[q]) * width));
      }
      status_ = workers_->SumInRankOrder(std::span<double>(global_));
      SumRowsInOrder(global_, width, sums_);
    }
  }
  if (!out_.Wait()) return Status(StatusCode::kAborted, "another replica's step failed");
  std::copy(sums_.begin(), sums_.begin() + static_cast<std::ptrdiff_t>(w), sums.begin());
  return status_;
}

}  // namespace lockstep::training
