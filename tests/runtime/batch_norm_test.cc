// BatchNormTraining and its gradient: against finite differences in float64, against the
// formula, and cut among replicas (a BatchGroup of threads): the statistics and the normalised
// values are the same bits as the whole batch's, and each replica's gradient, weighted by its
// share of the rows, adds up to the whole batch's.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <thread>
#include <vector>

#include "runtime/batch_group.h"
#include "runtime/graph_builder.h"
#include "runtime/session.h"
#include "tests/runtime/gradient_check_util.h"

namespace lockstep {
namespace {

using grad_test::CheckGradients;
using grad_test::RandomF64;

TEST(BatchNormGradientCheck, ImagesAndRowsThroughTheBatchStatistics) {
  for (const Shape& x : {Shape{4, 3}, Shape{3, 2, 2, 3}}) {
    CheckGradients({"BatchNormTraining " + x.ToString(),
                    {x, Shape{3}, Shape{3}},
                    [x](GraphBuilder& g, const std::vector<std::string>& in) {
                      AttrMap attrs;
                      attrs.Set("epsilon", 1e-3);
                      return std::pair{g.Op("BatchNormTraining", {in[0], in[1], in[2]}, attrs), x};
                    },
                    0.1, 2.0});
  }
}

// A whole batch [rows, 2, 3] through one session: (y, mean, variance), and the gradients of a
// mean loss over the rows (as a trainer's) with respect to x, gamma and beta.
struct BatchNormRun {
  std::vector<NamedTensor> out;  // y, mean, variance, dx, dgamma, dbeta
};

std::unique_ptr<Session> BatchNormSession(DType dtype, BatchGroup* group) {
  GraphBuilder g;
  const std::string x = g.Input("x", dtype, Shape{-1, 2, 3});
  const std::string r = g.Input("r", dtype, Shape{-1, 2, 3});
  const std::string gamma = g.Input("gamma", dtype, Shape{3});
  const std::string beta = g.Input("beta", dtype, Shape{3});
  const std::string y = g.Op("BatchNormTraining", {x, gamma, beta}, {}, "bn");
  // A second batch norm after the first (its gradient feeds the first's), on each example's
  // mean over the positions.
  AttrMap positions;
  positions.Set("axes", std::vector<int64_t>{1});
  const std::string pooled = g.Op("Mean", {g.Op("Relu", {y})}, positions);
  const std::string z = g.Op("BatchNormTraining", {pooled, gamma, beta}, {}, "bn2");
  AttrMap channels;
  channels.Set("axes", std::vector<int64_t>{1});
  const std::string per_row = g.Op("Sum", {g.Op("Mul", {z, g.Op("Mean", {r}, positions)})}, channels);
  AttrMap all;
  all.Set("axes", std::vector<int64_t>{1, 2});
  const std::string loss = g.Op("Mean", {g.Op("Add", {per_row, g.Op("Sum", {g.Op("Mul", {y, r})}, all)})}, {}, "loss");
  Signature sig;
  sig.name = "run";
  sig.inputs = {{"x", x, dtype, Shape{-1, 2, 3}},
                {"r", r, dtype, Shape{-1, 2, 3}},
                {"gamma", gamma, dtype, Shape{3}},
                {"beta", beta, dtype, Shape{3}}};
  sig.outputs = {{"y", y, dtype, Shape{-1, 2, 3}}, {"mean", "bn:1", dtype, Shape{3}}, {"variance", "bn:2", dtype, Shape{3}}};
  g.AddSignature(sig);
  Model model = std::move(g).Build();
  StatusOr<std::vector<std::string>> grads = AddGradients(model, loss, std::vector<std::string>{x, gamma, beta});
  EXPECT_TRUE(grads.ok()) << grads.status().ToString();
  const Shape shapes[] = {Shape{-1, 2, 3}, Shape{3}, Shape{3}};
  for (size_t i = 0; i < 3; ++i) {
    model.graph.signatures[0].outputs.push_back({"d" + std::to_string(i), grads.value()[i], dtype, shapes[i]});
  }
  SessionOptions options;
  options.batch_group = group;
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(model), options);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  return std::move(session).value();
}

Tensor Rows(const Tensor& t, int64_t begin, int64_t rows) {
  return Tensor::FromVector<float>(Shape{rows, 2, 3},
                                   {t.data<float>().begin() + begin * 6, t.data<float>().begin() + (begin + rows) * 6});
}

Tensor Float32(const Tensor& t) {
  std::vector<float> v;
  for (double d : t.data<double>()) v.push_back(static_cast<float>(d));
  return Tensor::FromVector<float>(t.shape(), v);
}

// Replicas in threads: each writes its rows' values at its place in the batch, and after a
// barrier each sums every row in order.
class ThreadGroup {
 public:
  ThreadGroup(std::vector<int64_t> begins, int64_t total) : begins_(std::move(begins)), total_(total), sync_(static_cast<std::ptrdiff_t>(begins_.size())) {}

  class Member : public BatchGroup {
   public:
    Member(ThreadGroup& group, size_t index) : group_(group), index_(index) {}
    int64_t global_rows() const override { return group_.total_; }
    Status SumRows(std::span<const double> local, int64_t width, std::span<double> sums) override {
      std::vector<double>& all = group_.rows_;
      group_.sync_.arrive_and_wait();
      if (index_ == 0) all.assign(static_cast<size_t>(group_.total_ * width), 0.0);
      group_.sync_.arrive_and_wait();
      std::copy(local.begin(), local.end(), all.begin() + group_.begins_[index_] * width);
      group_.sync_.arrive_and_wait();
      SumRowsInOrder(all, width, sums);
      group_.sync_.arrive_and_wait();
      return Status::Ok();
    }

   private:
    ThreadGroup& group_;
    size_t index_;
  };

 private:
  std::vector<int64_t> begins_;
  int64_t total_;
  std::barrier<> sync_;
  std::vector<double> rows_;
};

TEST(BatchNormTraining, StatisticsAreTheWholeBatchsBitForBitWhenItIsCutAmongReplicas) {
  const int64_t rows = 7;
  const Tensor x = Float32(RandomF64(Shape{rows, 2, 3}, 1, 0.1, 3.0));
  const Tensor r = Float32(RandomF64(Shape{rows, 2, 3}, 2, 0.5, 1.5));
  const Tensor gamma = Tensor::FromVector<float>(Shape{3}, {1.5f, 0.5f, -2.0f});
  const Tensor beta = Tensor::FromVector<float>(Shape{3}, {0.25f, -1.0f, 3.0f});
  std::unique_ptr<Session> whole = BatchNormSession(DType::kFloat32, nullptr);
  std::vector<NamedTensor> expected;
  const std::vector<NamedTensor> feed = {{"x", x}, {"r", r}, {"gamma", gamma}, {"beta", beta}};
  ASSERT_TRUE(whole->Run("run", feed, &expected).ok());

  // The formula, in float64.
  for (int64_t k = 0; k < 3; ++k) {
    double sum = 0, squares = 0;
    for (int64_t p = k; p < rows * 6; p += 3) sum += x.data<float>()[static_cast<size_t>(p)];
    const double mean = sum / (rows * 2);
    for (int64_t p = k; p < rows * 6; p += 3) squares += std::pow(x.data<float>()[static_cast<size_t>(p)] - mean, 2);
    EXPECT_NEAR(expected[1].tensor.data<float>()[static_cast<size_t>(k)], mean, 1e-6);
    EXPECT_NEAR(expected[2].tensor.data<float>()[static_cast<size_t>(k)], squares / (rows * 2), 1e-5);
  }

  for (const std::vector<int64_t>& cut : {std::vector<int64_t>{0, 3, 7}, std::vector<int64_t>{0, 1, 4, 7}}) {
    const size_t n = cut.size() - 1;
    ThreadGroup group({cut.begin(), cut.end() - 1}, rows);
    std::vector<std::unique_ptr<ThreadGroup::Member>> members;
    std::vector<std::unique_ptr<Session>> sessions;
    std::vector<std::vector<NamedTensor>> outs(n);
    for (size_t i = 0; i < n; ++i) {
      members.push_back(std::make_unique<ThreadGroup::Member>(group, i));
      sessions.push_back(BatchNormSession(DType::kFloat32, members.back().get()));
    }
    std::vector<std::thread> threads;
    std::vector<Status> status(n);
    for (size_t i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        const int64_t b = cut[i], m = cut[i + 1] - cut[i];
        const std::vector<NamedTensor> shard = {{"x", Rows(x, b, m)}, {"r", Rows(r, b, m)}, {"gamma", gamma}, {"beta", beta}};
        status[i] = sessions[i]->Run("run", shard, &outs[i]);
      });
    }
    for (std::thread& t : threads) t.join();
    for (size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(status[i].ok()) << status[i].ToString();
      const int64_t b = cut[i], m = cut[i + 1] - cut[i];
      const double share = static_cast<double>(m) / rows;
      for (int o : {1, 2}) {  // mean and variance: bit for bit
        for (int64_t k = 0; k < 3; ++k) {
          EXPECT_EQ(outs[i][o].tensor.data<float>()[k], expected[o].tensor.data<float>()[k]) << "output " << o;
        }
      }
      for (int64_t e = 0; e < m * 6; ++e) {
        const auto u = static_cast<size_t>(e), w = static_cast<size_t>(b * 6 + e);
        EXPECT_EQ(outs[i][0].tensor.data<float>()[u], expected[0].tensor.data<float>()[w]) << "y[" << w << "]";
        // dx of the replica's own mean loss, weighted by its share: the whole batch's dx.
        EXPECT_NEAR(outs[i][3].tensor.data<float>()[u] * share, expected[3].tensor.data<float>()[w], 2e-6) << "dx[" << w << "]";
      }
    }
    for (int o : {4, 5}) {  // dgamma and dbeta: the shares' weighted sum
      for (int64_t k = 0; k < 3; ++k) {
        double sum = 0;
        for (size_t i = 0; i < n; ++i) sum += outs[i][o].tensor.data<float>()[k] * static_cast<double>(cut[i + 1] - cut[i]) / rows;
        EXPECT_NEAR(sum, expected[o].tensor.data<float>()[k], 2e-6) << "output " << o;
      }
    }
  }
}

TEST(BatchNormTraining, RejectsWhatItCannotNormalise) {
  GraphBuilder g;
  const std::string x = g.Input("x", DType::kFloat32, Shape{-1, 4});
  const std::string gamma = g.Input("gamma", DType::kFloat32, Shape{3});
  g.Op("BatchNormTraining", {x, gamma, gamma}, {}, "bn");
  Signature sig;
  sig.name = "run";
  sig.inputs = {{"x", x, DType::kFloat32, Shape{-1, 4}}, {"gamma", gamma, DType::kFloat32, Shape{3}}};
  sig.outputs = {{"y", "bn", DType::kFloat32, Shape{-1, 4}}};
  g.AddSignature(sig);
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(g).Build());
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("per-channel input must be float32 [4]"), std::string::npos)
      << session.status().ToString();
}

}  // namespace
}  // namespace lockstep
