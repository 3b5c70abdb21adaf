// SessionsPerInput: the sessions of a model whose graph is made per input (GraphPerInput in
// runtime/graph.h), one per key, the most recently used kept.
//
// The first run of a key makes its graph and compiles it (the time to a first answer of a new
// input shape: the translation and the compilation of the whole model); the runs after it
// find the session and run as any session runs, allocating nothing once warm. Each cached
// session holds its own compiled weights, so a model with N cached keys holds its weights N
// times: SessionOptions::max_graphs_per_input bounds N.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>

#include "runtime/graph.h"
#include "runtime/session.h"
#include "runtime/status.h"

namespace lockstep {

class SessionsPerInput {
 public:
  SessionsPerInput(std::shared_ptr<const GraphPerInput> per_input, const SessionOptions& options);

  // The session for a run on `inputs` (in the signature's input order, checked against it).
  // Two runs of one new key at once may both compile it; one session is kept. A graph that
  // cannot be made is not remembered (its error is the run's): each run of that key tries
  // again, and no failure takes the place of a session kept.
  StatusOr<std::shared_ptr<const Session>> For(std::span<const Tensor* const> inputs);

  // The sessions kept, and the bytes of weights packed for them all.
  size_t size() const;
  size_t packed_weight_bytes() const;

 private:
  // The session of `key`, moved to the front; null if none.
  const std::shared_ptr<const Session>* FindLocked(const std::string& key);

  std::shared_ptr<const GraphPerInput> per_input_;
  SessionOptions options_;
  mutable std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const Session>>> recent_;  // most recent first
};

}  // namespace lockstep
