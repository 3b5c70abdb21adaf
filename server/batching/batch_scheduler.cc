#include "server/batching/batch_scheduler.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <new>

#include "server/batching/batch_tensors.h"

namespace lockstep {

using Clock = std::chrono::steady_clock;

namespace {

double SecondsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Whether every input and output of `signature` has a variable first dimension, so that
// requests can be stacked along it and the outputs split back.
bool Batchable(const Signature& signature) {
  auto variable_rows = [](const TensorBinding& b) { return b.shape.rank() >= 1 && b.shape[0] < 0; };
  return !signature.inputs.empty() &&
         std::all_of(signature.inputs.begin(), signature.inputs.end(), variable_rows) &&
         std::all_of(signature.outputs.begin(), signature.outputs.end(), variable_rows);
}

bool InSignatureOrder(const Signature& signature, std::span<const NamedTensor> inputs) {
  if (inputs.size() != signature.inputs.size()) return false;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].name != signature.inputs[k].key) return false;
  }
  return true;
}

// The most bytes one input of a batch may take. Requests are capped on their own; this caps
// what padding variable-length requests to the largest of them could make of a batch.
constexpr size_t kMaxBatchInputBytes = size_t{256} << 20;

Status RunAlone(const Session& session, const Signature& signature, std::span<const NamedTensor> inputs,
                std::vector<NamedTensor>* outputs, BatchScheduler::Timing* timing) {
  const Clock::time_point start = Clock::now();
  Status status;
  try {
    status = session.Run(signature.name, inputs, outputs);
  } catch (const std::bad_alloc&) {
    status = ResourceExhausted("out of memory while running the request");
  }
  timing->compute_seconds = SecondsBetween(start, Clock::now());
  return status;
}

}  // namespace

// A request whose caller waits for it (BatchScheduler::Run).
class WaitingTask final : public BatchTask {
 public:
  Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return std::move(status_);
  }

 private:
  void OnBatchDone(Status status) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = std::move(status);
    done_ = true;
    cv_.notify_one();  // under the lock: the caller cannot return (and free this) before it
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
};

struct BatchScheduler::Queue {
  std::weak_ptr<const LoadedVersion> servable;
  const LoadedVersion* servable_address = nullptr;  // identity, compared while `servable` lives
  const Signature* signature = nullptr;
  bool batchable = false;
  std::shared_ptr<const BatchingOptions> options;
  BatchTask* head = nullptr;
  BatchTask* tail = nullptr;
  int64_t requests = 0;
  int64_t rows = 0;

  // Takes `task`, which follows `prev` (null: the head), out of the queue.
  void Unlink(BatchTask* prev, BatchTask* task) {
    (prev == nullptr ? head : prev->next_) = task->next_;
    if (tail == task) tail = prev;
    task->next_ = nullptr;
    --requests;
    rows -= task->rows_;
  }
};

// A batch thread's tensors, kept from batch to batch: the batch's inputs are views of the
// first rows of `capacity`, rewritten in place, and the session writes into `outputs` in place
// while their shapes repeat; so a steady load allocates only the requests' own outputs.
struct BatchScheduler::Buffers {
  std::vector<Tensor> capacity;
  std::vector<NamedTensor> inputs;
  std::vector<NamedTensor> outputs;
};

BatchScheduler::BatchScheduler(int num_threads, BatchingOptions defaults, BatchObserver observer)
    : defaults_(std::make_shared<const BatchingOptions>(std::move(defaults))),
      observer_(std::move(observer)) {
  const int n = std::max(num_threads, 1);
  threads_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { BatchLoop(); });
}

BatchScheduler::~BatchScheduler() {
  Stop();
}

void BatchScheduler::Stop() {
  std::call_once(stop_once_, [this] {
    std::vector<BatchTask*> refused;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      for (auto& [signature, queue] : queues_) {
        while (queue->head != nullptr) {
          refused.push_back(queue->head);
          queue->Unlink(nullptr, queue->head);
        }
      }
    }
    work_cv_.notify_all();
    for (BatchTask* task : refused) task->OnBatchDone(Status(StatusCode::kUnavailable, "the server is shutting down"));
    for (std::thread& t : threads_) t.join();
  });
}

std::shared_ptr<const BatchingOptions> BatchScheduler::OptionsForLocked(std::string_view model) const {
  const auto it = per_model_.find(model);
  return it == per_model_.end() ? defaults_ : it->second;
}

void BatchScheduler::SetModelOptions(std::map<std::string, BatchingOptions, std::less<>> per_model) {
  std::map<std::string, std::shared_ptr<const BatchingOptions>, std::less<>> shared;
  for (auto& [model, options] : per_model)
    shared[model] = std::make_shared<const BatchingOptions>(std::move(options));
  std::lock_guard<std::mutex> lock(mu_);
  per_model_ = std::move(shared);
  for (auto& [signature, queue] : queues_) {
    if (const ServableHandle servable = queue->servable.lock())
      queue->options = OptionsForLocked(servable->model());
  }
  work_cv_.notify_all();  // a shorter timeout may make a queue ready now
}

Status BatchScheduler::Run(const ServableHandle& servable, const Signature& signature,
                           std::span<const NamedTensor> inputs, std::vector<NamedTensor>* outputs,
                           Clock::time_point deadline, Timing* timing) {
  WaitingTask task;
  Submit(servable, signature, inputs, outputs, deadline, &task);
  Status status = task.Wait();
  *timing = task.timing();
  return status;
}

void BatchScheduler::Submit(const ServableHandle& servable, const Signature& signature,
                            std::span<const NamedTensor> inputs, std::vector<NamedTensor>* outputs,
                            Clock::time_point deadline, BatchTask* task) {
  task->inputs_ = inputs;
  task->outputs_ = outputs;
  task->deadline_ = deadline;
  task->timing_ = {};
  task->next_ = nullptr;
  StatusOr<bool> queued = false;
  try {
    queued = Enqueue(servable, signature, task);
  } catch (const std::bad_alloc&) {  // a new queue: the task must be answered all the same
    queued = ResourceExhausted("out of memory while queueing the request");
  }
  if (!queued.ok()) {
    task->OnBatchDone(queued.status());
  } else if (*queued) {
    work_cv_.notify_one();
  } else {
    RunNow(servable->session(), signature, inputs, outputs, task);
  }
}

void BatchScheduler::RunNow(const Session& session, const Signature& signature, std::span<const NamedTensor> inputs,
                            std::vector<NamedTensor>* outputs, BatchTask* task) {
  task->timing_ = {};
  task->OnBatchDone(RunAlone(session, signature, inputs, outputs, &task->timing_));
}

StatusOr<bool> BatchScheduler::Enqueue(const ServableHandle& servable, const Signature& signature, BatchTask* task) {
  LS_RETURN_IF_ERROR(servable->session().CheckInputs(signature.name, task->inputs_));
  bool alone = !InSignatureOrder(signature, task->inputs_);
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return Status(StatusCode::kUnavailable, "the server is shutting down");
  std::shared_ptr<Queue>& queue = queues_[&signature];
  if (queue == nullptr || queue->servable_address != servable.get() || queue->servable.expired()) {
    // New, or left by a version that is gone (whose queue is empty: its requests held it).
    queue = std::make_shared<Queue>();
    queue->servable = servable;
    queue->servable_address = servable.get();
    queue->signature = &signature;
    queue->batchable = Batchable(signature);
    queue->options = OptionsForLocked(servable->model());
    if (!queue->batchable) {
      spdlog::info(
          "event=batching_off model={} version={} signature={} reason=\"an input or output has a fixed "
          "first dimension\"",
          servable->model(), servable->version(), signature.name);
    }
  }
  alone = alone || !queue->batchable;
  if (!alone) {
    LS_ASSIGN_OR_RETURN(task->rows_, BatchRowsOf(task->inputs_));
    // A request of no rows has nothing to add to a batch (and no row to pad one with).
    alone = task->rows_ == 0;
  }
  if (alone) return false;
  const BatchingOptions& options = *queue->options;
  if (task->rows_ > options.max_batch_size) {
    return InvalidArgument("the request has " + std::to_string(task->rows_) +
                           " rows, more than the largest batch (max_batch_size " +
                           std::to_string(options.max_batch_size) + ")");
  }
  if (queue->rows + task->rows_ > options.max_enqueued_batches * options.max_batch_size) {
    return ResourceExhausted("the batch queue of model '" + servable->model() + "' version " +
                             std::to_string(servable->version()) + " signature '" + signature.name +
                             "' is full (" + std::to_string(queue->requests) + " requests, " +
                             std::to_string(queue->rows) + " rows waiting); try again later");
  }
  task->enqueued_ = Clock::now();
  if (queue->tail != nullptr)
    queue->tail->next_ = task;
  else
    queue->head = task;
  queue->tail = task;
  ++queue->requests;
  queue->rows += task->rows_;
  return true;
}

std::shared_ptr<BatchScheduler::Queue> BatchScheduler::PickReadyLocked(Clock::time_point now,
                                                                       Clock::time_point* wake) {
  std::shared_ptr<Queue> best;
  for (auto it = queues_.begin(); it != queues_.end();) {
    const std::shared_ptr<Queue>& queue = it->second;
    if (queue->head == nullptr) {
      // Nothing waits; a queue whose version is gone can never be used again.
      it = queue->servable.expired() ? queues_.erase(it) : std::next(it);
      continue;
    }
    const BatchingOptions& options = *queue->options;
    const Clock::time_point due = queue->head->enqueued_ + options.batch_timeout;
    const bool ready = now >= due || queue->rows >= options.max_batch_size || queue->head->deadline_ <= now;
    if (!ready) {
      *wake = std::min({*wake, due, queue->head->deadline_});
    } else if (best == nullptr || queue->head->enqueued_ < best->head->enqueued_) {
      best = queue;
    }
    ++it;
  }
  return best;
}

void BatchScheduler::BatchLoop() {
  Buffers buffers;
  std::vector<Shape> shapes;  // the batch's input shapes
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    Clock::time_point wake = Clock::time_point::max();
    const Clock::time_point now = Clock::now();
    std::shared_ptr<Queue> queue = PickReadyLocked(now, &wake);
    if (queue == nullptr) {
      if (wake == Clock::time_point::max())
        work_cv_.wait(lock);
      else
        work_cv_.wait_until(lock, wake);
      continue;
    }
    // Take the batch: the head, then the requests after it, in order, that fit and can share
    // its batch (one of another shape waits for the next). Requests whose deadline passed are
    // answered without running. The scan is bounded, so a long queue costs no more than this.
    const std::shared_ptr<const BatchingOptions> options_now = queue->options;
    const BatchingOptions& options = *options_now;
    BatchTask* first = nullptr;
    BatchTask* last = nullptr;
    BatchTask* expired = nullptr;
    int64_t rows = 0;
    int64_t scanned = 0;
    BatchTask* prev = nullptr;
    shapes.clear();
    for (BatchTask* task = queue->head;
         task != nullptr && rows < options.max_batch_size && scanned < 2 * options.max_batch_size + 64;
         ++scanned) {
      BatchTask* next = task->next_;
      const int64_t padded = PaddedBatchSize(rows + task->rows_, options.allowed_batch_sizes);
      if (task->deadline_ <= now) {
        queue->Unlink(prev, task);
        task->next_ = expired;
        expired = task;
      } else if (first == nullptr) {
        // The head always runs, within the byte cap or not: alone, it is a request like any.
        if (!GrowBatchShapes(task->inputs_, padded, kMaxBatchInputBytes, &shapes)) {
          GrowBatchShapes(task->inputs_, padded, std::numeric_limits<size_t>::max(), &shapes);
        }
        queue->Unlink(prev, task);
        first = last = task;
        rows = task->rows_;
      } else if (rows + task->rows_ <= options.max_batch_size &&
                 CanShareBatch(first->inputs_, task->inputs_, options.pad_variable_length_inputs) &&
                 GrowBatchShapes(task->inputs_, padded, kMaxBatchInputBytes, &shapes)) {
        queue->Unlink(prev, task);
        last->next_ = task;
        last = task;
        rows += task->rows_;
      } else {
        prev = task;
      }
      task = next;
    }
    // More may wait, here or in other queues, for the other batch threads.
    for (const auto& [unused, other] : queues_) {
      if (other->head != nullptr) {
        work_cv_.notify_one();
        break;
      }
    }
    lock.unlock();
    while (expired != nullptr) {
      BatchTask* next = expired->next_;
      expired->OnBatchDone(
          Status(StatusCode::kDeadlineExceeded, "the request's deadline passed while it waited for a batch"));
      expired = next;
    }
    if (first != nullptr) RunBatch(*queue, options, shapes, first, rows, buffers);
    queue.reset();
    lock.lock();
  }
}

void BatchScheduler::RunBatch(const Queue& queue, const BatchingOptions& options,
                              std::span<const Shape> shapes, BatchTask* first, int64_t rows, Buffers& buffers) {
  // The requests hold their version; so does this thread while the batch runs.
  const ServableHandle servable = queue.servable.lock();
  const Signature& signature = *queue.signature;
  const Session& session = servable->session();
  const int64_t padded_rows = shapes.front()[0];
  size_t requests = 0;
  for (BatchTask* t = first; t != nullptr; t = t->next_) ++requests;

  Status status;
  Clock::time_point start = Clock::now();
  Clock::time_point end = start;
  try {
    const size_t num_inputs = signature.inputs.size();
    buffers.capacity.resize(num_inputs);
    buffers.inputs.resize(num_inputs);
    for (size_t k = 0; k < num_inputs; ++k) {
      const Shape& shape = shapes[k];
      Tensor& capacity = buffers.capacity[k];
      const DType dtype = first->inputs_[k].tensor.dtype();
      bool fits = capacity.dtype() == dtype && capacity.shape().rank() == shape.rank() &&
                  capacity.shape()[0] >= padded_rows;
      for (int d = 1; fits && d < shape.rank(); ++d) fits = capacity.shape()[d] == shape[d];
      if (!fits) {
        // Growing by doubling (up to the largest batch, and the byte cap), so that a rising
        // load reallocates a few times, not batch after batch.
        const bool same_kind = capacity.dtype() == dtype && capacity.shape().rank() == shape.rank();
        const int64_t row_bytes =
            std::max<int64_t>(1, shape.num_elements() / std::max<int64_t>(padded_rows, 1)) *
            static_cast<int64_t>(DTypeSize(dtype));
        const int64_t affordable = static_cast<int64_t>(kMaxBatchInputBytes) / row_bytes;
        const int64_t doubled = same_kind ? 2 * capacity.shape()[0] : 0;
        Shape room = shape;
        room.set_dim(0, std::max(padded_rows, std::min({doubled, options.max_batch_size, affordable})));
        capacity = Tensor(dtype, room);
      }
      Tensor batch = capacity.Rows(0, padded_rows);
      int64_t at = 0;
      for (BatchTask* t = first; t != nullptr; t = t->next_) {
        CopyRowsInto(t->inputs_[k].tensor, at, batch);
        at += t->rows_;
      }
      RepeatFirstRow(batch, rows);
      if (buffers.inputs[k].name != signature.inputs[k].key) buffers.inputs[k].name = signature.inputs[k].key;
      buffers.inputs[k].tensor = std::move(batch);
    }
    start = Clock::now();
    status = session.Run(signature.name, buffers.inputs, &buffers.outputs);
    end = Clock::now();
  } catch (const std::bad_alloc&) {
    buffers.capacity.clear();
    status = ResourceExhausted("out of memory for a batch of " + std::to_string(padded_rows) + " rows");
  }
  for (size_t k = 0; status.ok() && k < buffers.outputs.size(); ++k) {
    const Shape& shape = buffers.outputs[k].tensor.shape();
    if (shape.rank() == 0 || shape[0] != padded_rows) {
      status = Internal("output '" + buffers.outputs[k].name + "' has shape " + shape.ToString() +
                        " for a batch of " + std::to_string(padded_rows) +
                        " rows, so it cannot be split back into requests");
    }
  }
  for (NamedTensor& input : buffers.inputs) input.tensor = Tensor();
  if (observer_) observer_({servable.get(), signature.name, rows, padded_rows, requests});

  int64_t at = 0;
  for (BatchTask* t = first; t != nullptr;) {
    BatchTask* next = t->next_;  // read first: the task may be gone once it is done
    Status result = status;
    if (status.ok()) {
      t->outputs_->resize(buffers.outputs.size());
      for (size_t k = 0; k < buffers.outputs.size(); ++k) {
        NamedTensor& out = (*t->outputs_)[k];
        out.name = buffers.outputs[k].name;
        out.tensor.AssignCopyOf(buffers.outputs[k].tensor.Rows(at, t->rows_));
      }
      t->timing_.compute_seconds = SecondsBetween(start, end);
    } else if (requests > 1) {
      // One request's failure (a bad value a kernel refuses, a batch over the memory budget)
      // must not become the others': each runs alone and gets its own answer.
      result = RunAlone(session, signature, t->inputs_, t->outputs_, &t->timing_);
    }
    t->timing_.queue_seconds = SecondsBetween(t->enqueued_, start);
    at += t->rows_;
    t->OnBatchDone(std::move(result));
    t = next;
  }
}

std::vector<BatchQueueDepth> BatchScheduler::QueueDepths() const {
  std::vector<BatchQueueDepth> depths;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [signature, queue] : queues_) {
    const ServableHandle servable = queue->servable.lock();
    if (servable == nullptr || !queue->batchable) continue;
    depths.push_back({servable->model(), servable->version(), signature->name, queue->requests});
  }
  return depths;
}

}  // namespace lockstep
