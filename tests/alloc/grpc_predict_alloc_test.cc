// A warmed-up gRPC Predict allocates nothing when its shape repeats: its messages come from
// the service's PooledMessageAllocator (the request parsed from the wire into the holder's
// arena, as gRPC parses it), PredictApi decodes the inputs into the call's tensors, runs the
// graph into the call's outputs, records the metrics and writes the answer into the pooled
// response, which is serialized into a reused string. (gRPC's transport around it is gRPC's;
// Warm means settled: 20 calls allocate nothing once five rounds in a row have not.)
//
// One exception, counted exactly: a bytes field's contents (tensor_content, as numpy clients
// send tensors) live on the heap even in an arena message (protobuf 3.21 arenas hold the
// std::string, not its buffer), so such a request costs one allocation, made and freed by the
// parse.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "server/pooled_message_allocator.h"
#include "server/predict_api.h"
#include "tests/alloc/counting_new.h"
#include "tests/alloc/served_doubler.h"

namespace lockstep {
namespace {

namespace tfs = tensorflow::serving;

class CountingPredictGrpcCall final : public PredictCall {
 public:
  int answered = 0;
  bool ok = false;

 private:
  void OnAnswered(const Status& status) override {
    ++answered;
    ok = status.ok();
  }
};

struct GrpcPredictCase {
  const char* name;
  int elements;
  bool tensor_content;  // the values as raw bytes rather than float_val
  int allocations;      // per warmed-up call
};

class GrpcPredictAllocTest : public alloc_test::ServedDoubler, public ::testing::WithParamInterface<GrpcPredictCase> {};

TEST_P(GrpcPredictAllocTest, AWarmedUpPredictOfARepeatedShapeAllocatesNothing) {
  const GrpcPredictCase& c = GetParam();
  const PredictApi api(manager_, metrics_, health_, shadow_, /*batching=*/nullptr);
  PooledMessageAllocator<tfs::PredictRequest, tfs::PredictResponse> messages;

  tfs::PredictRequest sent;
  sent.mutable_model_spec()->set_name("m");
  tensorflow::TensorProto& x = (*sent.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(c.elements);
  std::vector<float> values(static_cast<size_t>(c.elements));
  for (int i = 0; i < c.elements; ++i) values[static_cast<size_t>(i)] = 0.01f * static_cast<float>(i % 97);
  if (c.tensor_content) {
    x.set_tensor_content(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  } else {
    x.mutable_float_val()->Add(values.begin(), values.end());
  }
  const std::string wire = sent.SerializeAsString();

  CountingPredictGrpcCall call;
  std::string answer;
  tfs::PredictResponse first;
  auto predict = [&](tfs::PredictResponse* copy) {
    grpc::MessageHolder<tfs::PredictRequest, tfs::PredictResponse>* holder = messages.AllocateMessages();
    ASSERT_TRUE(holder->request()->ParseFromString(wire));
    const int answered = call.answered;
    api.Start({holder->request(), holder->response(), "", "", std::chrono::steady_clock::time_point::max()}, &call);
    ASSERT_EQ(call.answered, answered + 1);
    ASSERT_TRUE(call.ok);
    ASSERT_TRUE(holder->response()->SerializeToString(&answer));
    if (copy != nullptr) *copy = *holder->response();
    holder->Release();
  };
  predict(&first);
  ASSERT_EQ(first.model_spec().name(), "m");
  ASSERT_EQ(first.model_spec().signature_name(), "serving_default");
  const tensorflow::TensorProto& y = first.outputs().at("y");
  ASSERT_EQ(y.float_val_size(), c.elements);
  EXPECT_FLOAT_EQ(y.float_val(5), 0.1f);
  for (int round = 0, quiet = 0; quiet < 5; ++round) {
    ASSERT_LT(round, 200) << "still allocates after 200 warm-up rounds";
    const int64_t start = alloc_test::Allocations();
    predict(nullptr);
    quiet = alloc_test::Allocations() - start == c.allocations ? quiet + 1 : 0;
  }
  const int64_t before = alloc_test::Allocations();
  for (int i = 0; i < 20; ++i) predict(nullptr);
  EXPECT_EQ(alloc_test::Allocations() - before, 20 * c.allocations) << "allocations in 20 warmed-up predicts";
  EXPECT_EQ(messages.pooled(), 1u) << "one call at a time needs one holder";
}

INSTANTIATE_TEST_SUITE_P(Shapes, GrpcPredictAllocTest,
                         ::testing::Values(GrpcPredictCase{"FloatVal784", 784, false, 0}, GrpcPredictCase{"TensorContent784", 784, true, 1},
                                           // past the first arena block: the holder's block grows to fit it
                                           GrpcPredictCase{"FloatVal100k", 100000, false, 0}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace lockstep
