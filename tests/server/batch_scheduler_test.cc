// The batch scheduler on a real session: concurrent requests are merged into one run and each
// gets its own rows back; batches are padded to allowed sizes; requests of another shape wait
// for their own batch (or share one, padded, with pad_variable_length_inputs); a full queue,
// a passed deadline, too many rows and bad inputs are refused at once and to that request
// only; signatures that cannot be batched run alone; Stop answers what still waits.
#include "server/batching/batch_scheduler.h"

#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/graph_builder.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kNoDeadline = Clock::time_point::max();

// y = 2x on [-1, -1] (serving_default); the same on a fixed [2, 2] ("fixed"); and "flat",
// whose output [-1] is x flattened, so it does not keep a batch's rows.
ServableHandle Doubler() {
  GraphBuilder g;
  const std::string x = g.Input("x", DType::kFloat32, Shape{-1, -1});
  const std::string two = g.Const("two", Tensor::Scalar<float>(2.0f));
  const std::string y = g.Op("Mul", {x, two}, {}, "y");
  g.AddSignature({std::string(kDefaultSignature),
                  "tensorflow/serving/predict",
                  {{"x", x, DType::kFloat32, Shape{-1, -1}}},
                  {{"y", y, DType::kFloat32, Shape{-1, -1}}}});
  const std::string fixed = g.Input("fixed_x", DType::kFloat32, Shape{2, 2});
  const std::string fixed_y = g.Op("Mul", {fixed, two}, {}, "fixed_y");
  g.AddSignature({"fixed",
                  "tensorflow/serving/predict",
                  {{"x", fixed, DType::kFloat32, Shape{2, 2}}},
                  {{"y", fixed_y, DType::kFloat32, Shape{2, 2}}}});
  const std::string flat = g.Op("Reshape", {y}, {{"shape", std::vector<int64_t>{-1}}}, "flat");
  g.AddSignature({"flat",
                  "tensorflow/serving/predict",
                  {{"x", x, DType::kFloat32, Shape{-1, -1}}},
                  {{"y", flat, DType::kFloat32, Shape{-1}}}});
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(g).Build());
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  return std::make_shared<const LoadedVersion>("m", 1, "/nonexistent", std::move(session).value(),
                                               std::chrono::system_clock::now());
}

std::vector<NamedTensor> Rows(const Shape& shape, std::vector<float> values) {
  return {{"x", Tensor::FromVector<float>(shape, values)}};
}

Tensor Floats(const Shape& shape, std::vector<float> values) {
  return Tensor::FromVector<float>(shape, values);
}

// Records the batches that ran.
struct Batches {
  std::mutex mu;
  std::vector<BatchRun> runs;
  BatchScheduler::BatchObserver Observer() {
    return [this](const BatchRun& run) {
      std::lock_guard<std::mutex> lock(mu);
      runs.push_back(run);
    };
  }
  std::vector<BatchRun> Get() {
    std::lock_guard<std::mutex> lock(mu);
    return runs;
  }
};

struct Answer {
  Status status;
  std::vector<NamedTensor> outputs;
  BatchScheduler::Timing timing;
};

class BatchSchedulerTest : public ::testing::Test {
 protected:
  void Start(BatchingOptions options, int threads = 2) {
    scheduler_ = std::make_unique<BatchScheduler>(threads, std::move(options), batches_.Observer());
  }

  // Runs one request on its own thread; the answer comes back through the future.
  std::future<Answer> Submit(std::vector<NamedTensor> inputs, std::string_view signature = kDefaultSignature,
                             Clock::time_point deadline = kNoDeadline) {
    return std::async(std::launch::async, [this, inputs = std::move(inputs), signature, deadline] {
      Answer answer;
      answer.status = scheduler_->Run(servable_, *servable_->session().FindSignature(signature), inputs,
                                      &answer.outputs, deadline, &answer.timing);
      return answer;
    });
  }
  Answer RunNow(std::vector<NamedTensor> inputs, std::string_view signature = kDefaultSignature,
                Clock::time_point deadline = kNoDeadline) {
    return Submit(std::move(inputs), signature, deadline).get();
  }

  // Waits until `requests` wait in the queue (they were queued, not yet batched).
  bool WaitForQueued(int64_t requests) {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline) {
      int64_t queued = 0;
      for (const BatchQueueDepth& q : scheduler_->QueueDepths()) queued += q.requests;
      if (queued == requests) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
  }

  ServableHandle servable_ = Doubler();
  Batches batches_;
  std::unique_ptr<BatchScheduler> scheduler_;
};

BatchingOptions Options(int64_t max_batch_size, std::chrono::microseconds timeout) {
  BatchingOptions options;
  options.max_batch_size = max_batch_size;
  options.batch_timeout = timeout;
  return options;
}

TEST_F(BatchSchedulerTest, MergesConcurrentRequestsIntoOneRunAndGivesEachItsRows) {
  // A long timeout: the batch runs when its 4 rows are there, not before.
  Start(Options(4, std::chrono::seconds(30)));
  std::vector<std::future<Answer>> answers;
  for (int i = 0; i < 3; ++i) answers.push_back(Submit(Rows(Shape{1, 2}, {float(i), float(i + 10)})));
  ASSERT_TRUE(WaitForQueued(3));
  EXPECT_TRUE(batches_.Get().empty());
  answers.push_back(Submit(Rows(Shape{1, 2}, {3, 13})));
  for (int i = 0; i < 4; ++i) {
    Answer a = answers[i].get();
    ASSERT_TRUE(a.status.ok()) << a.status.ToString();
    ASSERT_EQ(a.outputs.size(), 1u);
    EXPECT_EQ(a.outputs[0].name, "y");
    EXPECT_TRUE(a.outputs[0].tensor.BitwiseEqual(Floats(Shape{1, 2}, {2.0f * i, 2.0f * (i + 10)})))
        << a.outputs[0].tensor.DebugString();
    EXPECT_GT(a.timing.compute_seconds, 0);
    if (i < 3) {
      EXPECT_GT(a.timing.queue_seconds, 0);
    }
  }
  const std::vector<BatchRun> runs = batches_.Get();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].rows, 4);
  EXPECT_EQ(runs[0].padded_rows, 4);
  EXPECT_EQ(runs[0].requests, 4u);
  EXPECT_EQ(runs[0].signature, kDefaultSignature);
  EXPECT_EQ(runs[0].servable, servable_.get());
}

// A request submitted without a thread to wait on it: its task is answered on the batch thread.
class RecordingTask final : public BatchTask {
 public:
  std::vector<NamedTensor> inputs;
  std::vector<NamedTensor> outputs;
  std::promise<Status> done;
  std::thread::id answered_on;

 private:
  void OnBatchDone(Status status) override {
    answered_on = std::this_thread::get_id();
    done.set_value(std::move(status));
  }
};

TEST_F(BatchSchedulerTest, SubmittedTasksAreAnsweredOnTheBatchThreadWithoutAWaitingThread) {
  Start(Options(3, std::chrono::seconds(30)), /*threads=*/1);
  std::vector<std::unique_ptr<RecordingTask>> tasks;
  std::vector<std::future<Status>> results;
  const Signature& signature = *servable_->session().FindSignature(kDefaultSignature);
  // All three from this one thread, which goes on without waiting; the third fills the batch.
  for (int i = 0; i < 3; ++i) {
    tasks.push_back(std::make_unique<RecordingTask>());
    RecordingTask& task = *tasks.back();
    task.inputs = Rows(Shape{1, 2}, {float(i), float(i + 1)});
    results.push_back(task.done.get_future());
    scheduler_->Submit(servable_, signature, task.inputs, &task.outputs, kNoDeadline, &task);
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(results[i].wait_for(std::chrono::seconds(20)), std::future_status::ready);
    const Status status = results[i].get();
    ASSERT_TRUE(status.ok()) << status.ToString();
    EXPECT_NE(tasks[i]->answered_on, std::this_thread::get_id());
    EXPECT_EQ(tasks[i]->answered_on, tasks[0]->answered_on);  // the one batch thread
    ASSERT_EQ(tasks[i]->outputs.size(), 1u);
    EXPECT_TRUE(tasks[i]->outputs[0].tensor.BitwiseEqual(Floats(Shape{1, 2}, {2.0f * i, 2.0f * (i + 1)})));
    EXPECT_GT(tasks[i]->timing().compute_seconds, 0);
  }
  ASSERT_EQ(batches_.Get().size(), 1u);
  EXPECT_EQ(batches_.Get()[0].requests, 3u);

  // A refusal is answered before Submit returns, on the submitting thread.
  RecordingTask refused;
  refused.inputs = Rows(Shape{4, 2}, {0, 0, 0, 0, 0, 0, 0, 0});  // more rows than max_batch_size
  std::future<Status> refusal = refused.done.get_future();
  scheduler_->Submit(servable_, signature, refused.inputs, &refused.outputs, kNoDeadline, &refused);
  ASSERT_EQ(refusal.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_EQ(refusal.get().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.answered_on, std::this_thread::get_id());
}

TEST_F(BatchSchedulerTest, PadsABatchUpToTheNextAllowedSize) {
  BatchingOptions options = Options(8, std::chrono::microseconds(0));
  options.allowed_batch_sizes = {4, 8};
  Start(options);
  const Answer a = RunNow(Rows(Shape{3, 1}, {1, 2, 3}));
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_TRUE(a.outputs[0].tensor.BitwiseEqual(Floats(Shape{3, 1}, {2, 4, 6})))
      << a.outputs[0].tensor.DebugString();
  const std::vector<BatchRun> runs = batches_.Get();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].rows, 3);
  EXPECT_EQ(runs[0].padded_rows, 4);
}

TEST_F(BatchSchedulerTest, AFullQueueRefusesAtOnceAndTheQueuedRequestsStillRun) {
  BatchingOptions options = Options(4, std::chrono::seconds(30));
  options.max_enqueued_batches = 1;  // 4 rows may wait
  Start(options);
  std::future<Answer> waiting = Submit(Rows(Shape{3, 1}, {1, 2, 3}));
  ASSERT_TRUE(WaitForQueued(1));
  const Answer refused = RunNow(Rows(Shape{2, 1}, {4, 5}));
  EXPECT_EQ(refused.status.code(), StatusCode::kResourceExhausted) << refused.status.ToString();
  EXPECT_NE(refused.status.message().find("is full"), std::string::npos) << refused.status.message();
  // One more row fills the batch, which then runs at once.
  const Answer filler = RunNow(Rows(Shape{1, 1}, {6}));
  ASSERT_TRUE(filler.status.ok()) << filler.status.ToString();
  EXPECT_TRUE(filler.outputs[0].tensor.BitwiseEqual(Floats(Shape{1, 1}, {12})));
  const Answer first = waiting.get();
  ASSERT_TRUE(first.status.ok()) << first.status.ToString();
  EXPECT_TRUE(first.outputs[0].tensor.BitwiseEqual(Floats(Shape{3, 1}, {2, 4, 6})));
  ASSERT_EQ(batches_.Get().size(), 1u);
}

TEST_F(BatchSchedulerTest, ARequestWhoseDeadlinePassedIsNotRun) {
  Start(Options(4, std::chrono::microseconds(0)));
  const Answer late =
      RunNow(Rows(Shape{1, 1}, {1}), kDefaultSignature, Clock::now() - std::chrono::milliseconds(1));
  EXPECT_EQ(late.status.code(), StatusCode::kDeadlineExceeded) << late.status.ToString();
  EXPECT_TRUE(batches_.Get().empty());
}

TEST_F(BatchSchedulerTest, BadRequestsAreRefusedBeforeTheyQueue) {
  Start(Options(4, std::chrono::microseconds(0)));
  const Answer big = RunNow(Rows(Shape{5, 1}, {1, 2, 3, 4, 5}));
  EXPECT_EQ(big.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(big.status.message().find("5 rows, more than the largest batch (max_batch_size 4)"),
            std::string::npos)
      << big.status.message();
  const Answer ints = RunNow({{"x", Tensor::FromVector<int32_t>(Shape{1, 1}, {1})}});
  EXPECT_EQ(ints.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ints.status.message().find("must be float32"), std::string::npos) << ints.status.message();
  const Answer unknown = RunNow({{"x", Tensor::FromVector<float>(Shape{1, 1}, {1})},
                                 {"z", Tensor::FromVector<float>(Shape{1, 1}, {1})}});
  EXPECT_EQ(unknown.status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(batches_.Get().empty());
}

TEST_F(BatchSchedulerTest, RequestsOfAnotherShapeWaitForTheirOwnBatch) {
  Start(Options(2, std::chrono::seconds(30)));
  std::future<Answer> narrow = Submit(Rows(Shape{1, 2}, {1, 2}));
  ASSERT_TRUE(WaitForQueued(1));
  // Two rows queued: a full batch, but the wide request cannot join the narrow one's.
  std::future<Answer> wide = Submit(Rows(Shape{1, 3}, {3, 4, 5}));
  const Answer a = narrow.get();
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_TRUE(a.outputs[0].tensor.BitwiseEqual(Floats(Shape{1, 2}, {2, 4})));
  ASSERT_TRUE(WaitForQueued(1));
  const Answer c = RunNow(Rows(Shape{1, 3}, {6, 7, 8}));
  ASSERT_TRUE(c.status.ok()) << c.status.ToString();
  EXPECT_TRUE(c.outputs[0].tensor.BitwiseEqual(Floats(Shape{1, 3}, {12, 14, 16})));
  const Answer b = wide.get();
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  EXPECT_TRUE(b.outputs[0].tensor.BitwiseEqual(Floats(Shape{1, 3}, {6, 8, 10})));
  const std::vector<BatchRun> runs = batches_.Get();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].rows, 1);
  EXPECT_EQ(runs[1].rows, 2);
}

TEST_F(BatchSchedulerTest, PaddingVariableLengthInputsLetsShapesShareABatch) {
  BatchingOptions options = Options(2, std::chrono::seconds(30));
  options.pad_variable_length_inputs = true;
  Start(options);
  std::future<Answer> narrow = Submit(Rows(Shape{1, 2}, {1, 2}));
  ASSERT_TRUE(WaitForQueued(1));
  const Answer b = RunNow(Rows(Shape{1, 3}, {3, 4, 5}));
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  EXPECT_TRUE(b.outputs[0].tensor.BitwiseEqual(Floats(Shape{1, 3}, {6, 8, 10})));
  const Answer a = narrow.get();
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  // The narrow request's row ran padded with its first element: its outputs are the batch's.
  EXPECT_TRUE(a.outputs[0].tensor.BitwiseEqual(Floats(Shape{1, 3}, {2, 4, 2})))
      << a.outputs[0].tensor.DebugString();
  ASSERT_EQ(batches_.Get().size(), 1u);
}

TEST_F(BatchSchedulerTest, SignaturesThatCannotBeBatchedRunAlone) {
  Start(Options(4, std::chrono::seconds(30)));
  const Answer fixed = RunNow(Rows(Shape{2, 2}, {1, 2, 3, 4}), "fixed");
  ASSERT_TRUE(fixed.status.ok()) << fixed.status.ToString();
  EXPECT_TRUE(fixed.outputs[0].tensor.BitwiseEqual(Floats(Shape{2, 2}, {2, 4, 6, 8})));
  EXPECT_TRUE(batches_.Get().empty());
  EXPECT_TRUE(scheduler_->QueueDepths().empty());
}

TEST_F(BatchSchedulerTest, AnOutputThatDoesNotKeepTheRowsFailsItsBatchClearly) {
  Start(Options(4, std::chrono::microseconds(0)));
  const Answer flat = RunNow(Rows(Shape{1, 2}, {1, 2}), "flat");
  EXPECT_EQ(flat.status.code(), StatusCode::kInternal);
  EXPECT_NE(flat.status.message().find("cannot be split back"), std::string::npos) << flat.status.message();
}

TEST_F(BatchSchedulerTest, WhenABatchFailsEachRequestRunsAloneAndGetsItsOwnAnswer) {
  // "flat" cannot be split back, but each request alone is fine.
  Start(Options(2, std::chrono::seconds(30)));
  std::future<Answer> a = Submit(Rows(Shape{1, 2}, {1, 2}), "flat");
  ASSERT_TRUE(WaitForQueued(1));
  const Answer b = RunNow(Rows(Shape{1, 2}, {3, 4}), "flat");
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  EXPECT_TRUE(b.outputs[0].tensor.BitwiseEqual(Floats(Shape{2}, {6, 8})))
      << b.outputs[0].tensor.DebugString();
  const Answer first = a.get();
  ASSERT_TRUE(first.status.ok()) << first.status.ToString();
  EXPECT_TRUE(first.outputs[0].tensor.BitwiseEqual(Floats(Shape{2}, {2, 4})));
  ASSERT_EQ(batches_.Get().size(), 1u);  // the batch that failed
  EXPECT_EQ(batches_.Get()[0].requests, 2u);
}

TEST_F(BatchSchedulerTest, ARequestOfNoRowsRunsAlone) {
  Start(Options(4, std::chrono::seconds(30)));
  const Answer empty = RunNow({{"x", Tensor(DType::kFloat32, Shape{0, 2})}});
  ASSERT_TRUE(empty.status.ok()) << empty.status.ToString();
  EXPECT_EQ(empty.outputs[0].tensor.shape(), (Shape{0, 2}));
  EXPECT_TRUE(batches_.Get().empty());
}

TEST_F(BatchSchedulerTest, AModelsOwnOptionsReplaceTheDefaults) {
  Start(Options(4, std::chrono::microseconds(0)));
  std::map<std::string, BatchingOptions, std::less<>> per_model;
  per_model["m"] = Options(1, std::chrono::microseconds(0));
  scheduler_->SetModelOptions(per_model);
  EXPECT_EQ(RunNow(Rows(Shape{2, 1}, {1, 2})).status.code(), StatusCode::kInvalidArgument);
  scheduler_->SetModelOptions({{"other", Options(1, std::chrono::microseconds(0))}});
  EXPECT_TRUE(RunNow(Rows(Shape{2, 1}, {1, 2})).status.ok());
}

TEST_F(BatchSchedulerTest, StopAnswersTheRequestsStillWaiting) {
  Start(Options(4, std::chrono::seconds(30)));
  std::future<Answer> waiting = Submit(Rows(Shape{1, 1}, {1}));
  ASSERT_TRUE(WaitForQueued(1));
  scheduler_->Stop();
  EXPECT_EQ(waiting.get().status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(RunNow(Rows(Shape{1, 1}, {1})).status.code(), StatusCode::kUnavailable);
}

TEST_F(BatchSchedulerTest, ManyClientsAllGetTheirOwnAnswers) {
  BatchingOptions options = Options(16, std::chrono::microseconds(500));
  options.allowed_batch_sizes = {4, 16};
  Start(options);
  std::vector<std::thread> clients;
  std::atomic<int> wrong{0};
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < 50; ++i) {
        const float v = static_cast<float>(c * 1000 + i);
        const int64_t rows = 1 + (i % 3);
        std::vector<float> values(static_cast<size_t>(rows * 2), v);
        std::vector<NamedTensor> outputs;
        BatchScheduler::Timing timing;
        const std::vector<NamedTensor> inputs = Rows(Shape{rows, 2}, values);
        const Status s = scheduler_->Run(servable_, *servable_->session().FindSignature(kDefaultSignature),
                                         inputs, &outputs, kNoDeadline, &timing);
        for (float& x : values) x *= 2;
        if (!s.ok() || outputs.size() != 1 || !outputs[0].tensor.BitwiseEqual(Floats(Shape{rows, 2}, values)))
          ++wrong;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
  int64_t rows = 0;
  for (const BatchRun& run : batches_.Get()) {
    rows += run.rows;
    EXPECT_TRUE(run.padded_rows == 4 || run.padded_rows == 16) << run.padded_rows;
  }
  EXPECT_EQ(rows, 8 * (17 * 1 + 17 * 2 + 16 * 3));
}

}  // namespace
}  // namespace lockstep
