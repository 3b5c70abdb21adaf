// A warmed-up Open Inference Protocol infer allocates nothing of its own when its shape repeats,
// as a predict does (rest_predict_alloc_test.cc, grpc_predict_alloc_test.cc):
//   - REST: RestApi::Start on a connection's reused call parses the /v2 path, reads the body
//     (JSON, flat or nested, or the binary extension) into the call's tensors, runs the graph and
//     writes the answer (JSON, or JSON and raw bytes) into the call's buffer;
//   - gRPC: a ModelInferRequest parsed from wire bytes into the pooled holder (as gRPC parses it),
//     decoded by proto_infer.h, run, and answered into the pooled response in place.
// As for Predict, a request whose values come as a bytes field (raw_input_contents) costs one
// allocation, made and freed by the parse: protobuf 3.21 keeps a bytes field's buffer on the
// heap even in an arena message.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "server/open_inference/infer_api.h"
#include "server/open_inference/proto_infer.h"
#include "server/pooled_message_allocator.h"
#include "server/rest_api.h"
#include "tests/alloc/counting_new.h"
#include "tests/alloc/served_doubler.h"

namespace lockstep {
namespace {

namespace oi = open_inference;

constexpr int kElements = 784;

std::vector<float> Values() {
  std::vector<float> values(kElements);
  for (int i = 0; i < kElements; ++i) values[static_cast<size_t>(i)] = 0.01f * static_cast<float>(i % 97);
  return values;
}

// Counts `call` until it is warm (five rounds in a row at `expected` allocations), then expects
// 20 more at exactly `expected` each.
template <typename Call>
void ExpectWarmCallsAllocate(Call&& call, int64_t expected) {
  for (int round = 0, quiet = 0; quiet < 5; ++round) {
    ASSERT_LT(round, 200) << "still allocates after 200 warm-up rounds";
    const int64_t start = alloc_test::Allocations();
    call();
    quiet = alloc_test::Allocations() - start == expected ? quiet + 1 : 0;
  }
  const int64_t before = alloc_test::Allocations();
  for (int i = 0; i < 20; ++i) call();
  EXPECT_EQ(alloc_test::Allocations() - before, 20 * expected) << "allocations in 20 warmed-up infers";
}

class CountingRestCall final : public RestCall {
 public:
  int answered = 0;

 private:
  void OnAnswered() override { ++answered; }
};

struct RestCase {
  const char* name;
  bool binary;  // input and output by the binary extension
  bool nested;  // "data" as [[...]]: read row-major whatever its nesting
};

class V2RestInferAllocTest : public alloc_test::ServedDoubler, public ::testing::WithParamInterface<RestCase> {};

TEST_P(V2RestInferAllocTest, AWarmedUpInferOfARepeatedShapeAllocatesNothing) {
  const RestCase& c = GetParam();
  const RestApi api(manager_, metrics_, health_, shadow_, /*batching=*/nullptr);
  const std::vector<float> values = Values();
  std::string body, header_length;
  if (c.binary) {
    body = R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [784], "parameters": {"binary_data_size": 3136}}],
               "parameters": {"binary_data_output": true}})";
    header_length = std::to_string(body.size());
    body.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  } else {
    std::string data;
    for (int i = 0; i < kElements; ++i) data += (i ? ", " : "") + std::to_string(values[static_cast<size_t>(i)]);
    body = c.nested ? R"({"id": "r1", "inputs": [{"name": "x", "datatype": "FP32", "shape": [784], "data": [[)" +
                          data + "]]}]}"
                    : R"({"id": "r1", "inputs": [{"name": "x", "datatype": "FP32", "shape": [784], "data": [)" + data +
                          "]}], \"outputs\": [{\"name\": \"y\"}]}";
  }
  RestRequest request;
  request.method = "POST";
  request.target = "/v2/models/m/infer";
  request.body = body;
  request.inference_header_length = header_length;
  CountingRestCall call;
  auto infer = [&] {
    const int answered = call.answered;
    api.Start(request, &call);
    ASSERT_EQ(call.answered, answered + 1);
    ASSERT_EQ(call.response.http_status, 200) << call.response.body;
  };
  infer();
  if (c.binary) {
    ASSERT_GT(call.response.inference_header_length, 0u);
    float y5;
    std::memcpy(&y5, call.response.body.data() + call.response.inference_header_length + 5 * sizeof(float), sizeof(y5));
    EXPECT_FLOAT_EQ(y5, 0.1f);
  } else {
    EXPECT_NE(call.response.body.find(R"("data":[0.0, 0.02, 0.04, )"), std::string::npos)
        << call.response.body.substr(0, 160);
  }
  ExpectWarmCallsAllocate(infer, 0);
}

INSTANTIATE_TEST_SUITE_P(Forms, V2RestInferAllocTest,
                         ::testing::Values(RestCase{"Json", false, false}, RestCase{"NestedJson", false, true},
                                           RestCase{"Binary", true, false}),
                         [](const auto& info) { return std::string(info.param.name); });

// A gRPC ModelInfer's call, with the codec the service uses.
class CountingProtoCall final : public oi::InferCall {
 public:
  const inference::ModelInferRequest* message = nullptr;
  inference::ModelInferResponse* response = nullptr;
  int answered = 0;
  bool ok = false;

 private:
  Status ReadRequest(oi::InferRequest* r) override { return oi::ReadInferRequest(*message, r); }
  Status WriteResponse(std::span<const oi::AnsweredOutput> outputs) override {
    oi::WriteInferResponse(servable().model(), servable().version(), request().id, outputs, response);
    return Status::Ok();
  }
  void OnAnswered(const Status& status) override {
    ++answered;
    ok = status.ok();
  }
};

struct GrpcCase {
  const char* name;
  bool raw;             // raw_input_contents rather than fp32_contents
  int64_t allocations;  // per warmed-up call
};

class V2GrpcInferAllocTest : public alloc_test::ServedDoubler, public ::testing::WithParamInterface<GrpcCase> {};

TEST_P(V2GrpcInferAllocTest, AWarmedUpModelInferOfARepeatedShapeAllocatesNothingOfItsOwn) {
  const GrpcCase& c = GetParam();
  const oi::InferApi api(manager_, metrics_, health_, shadow_, /*batching=*/nullptr);
  PooledMessageAllocator<inference::ModelInferRequest, inference::ModelInferResponse> messages;
  const std::vector<float> values = Values();
  inference::ModelInferRequest sent;
  sent.set_model_name("m");
  sent.set_id("r1");
  auto* x = sent.add_inputs();
  x->set_name("x");
  x->set_datatype("FP32");
  x->add_shape(kElements);
  if (c.raw) {
    sent.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  } else {
    x->mutable_contents()->mutable_fp32_contents()->Add(values.begin(), values.end());
  }
  const std::string wire = sent.SerializeAsString();
  CountingProtoCall call;
  std::string answer;
  auto infer = [&] {
    grpc::MessageHolder<inference::ModelInferRequest, inference::ModelInferResponse>* holder =
        messages.AllocateMessages();
    ASSERT_TRUE(holder->request()->ParseFromString(wire));
    call.message = holder->request();
    call.response = holder->response();
    const int answered = call.answered;
    api.Start({"m", "", "", oi::kGrpcProtocol}, &call);
    ASSERT_EQ(call.answered, answered + 1);
    ASSERT_TRUE(call.ok);
    ASSERT_TRUE(holder->response()->SerializeToString(&answer));
    holder->Release();
  };
  infer();
  inference::ModelInferResponse first;
  ASSERT_TRUE(first.ParseFromString(answer));
  EXPECT_EQ(first.id(), "r1");
  ASSERT_EQ(first.raw_output_contents_size(), 1);
  float y5;
  std::memcpy(&y5, first.raw_output_contents(0).data() + 5 * sizeof(float), sizeof(y5));
  EXPECT_FLOAT_EQ(y5, 0.1f);
  ExpectWarmCallsAllocate(infer, c.allocations);
  EXPECT_EQ(messages.pooled(), 1u) << "one call at a time needs one holder";
}

INSTANTIATE_TEST_SUITE_P(Contents, V2GrpcInferAllocTest,
                         ::testing::Values(GrpcCase{"Fp32Contents", false, 0}, GrpcCase{"RawInputContents", true, 1}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace lockstep
