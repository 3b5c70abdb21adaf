#include "runtime/sessions_per_input.h"

#include <algorithm>

namespace lockstep {

SessionsPerInput::SessionsPerInput(std::shared_ptr<const GraphPerInput> per_input, const SessionOptions& options)
    : per_input_(std::move(per_input)), options_(options) {
  options_.max_graphs_per_input = std::max<size_t>(options_.max_graphs_per_input, 1);
}

const std::shared_ptr<const Session>* SessionsPerInput::FindLocked(const std::string& key) {
  for (auto it = recent_.begin(); it != recent_.end(); ++it) {
    if (it->first != key) continue;
    recent_.splice(recent_.begin(), recent_, it);
    return &recent_.front().second;
  }
  return nullptr;
}

StatusOr<std::shared_ptr<const Session>> SessionsPerInput::For(std::span<const Tensor* const> inputs) {
  // The key's buffer keeps its capacity, so a run of a kept key allocates nothing.
  thread_local std::string key;
  per_input_->key(inputs, &key);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (const std::shared_ptr<const Session>* found = FindLocked(key)) return *found;
  }
  // Made outside the lock: runs of the keys already kept go on meanwhile.
  StatusOr<Model> model = per_input_->make(inputs);
  if (!model.ok()) return model.status();
  StatusOr<std::unique_ptr<Session>> made = Session::Create(std::move(model).value(), options_);
  if (!made.ok()) return made.status().WithPrefix("compiling the graph made for this input");
  std::shared_ptr<const Session> session = std::move(made).value();
  // Making the graph may have changed what the key holds (GraphPerInput::key): kept under the
  // key it answers to now.
  per_input_->key(inputs, &key);
  std::lock_guard<std::mutex> lock(mu_);
  if (const std::shared_ptr<const Session>* found = FindLocked(key)) return *found;  // another run made it first
  recent_.emplace_front(key, session);
  // A session dropped here lives on in the runs that hold it.
  while (recent_.size() > options_.max_graphs_per_input) recent_.pop_back();
  return session;
}

size_t SessionsPerInput::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return recent_.size();
}

size_t SessionsPerInput::packed_weight_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t bytes = 0;
  for (const auto& [key, session] : recent_) bytes += session->packed_weight_bytes();
  return bytes;
}

}  // namespace lockstep
