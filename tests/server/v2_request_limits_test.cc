// The v2 request decoders' memory bounds: what a request may make the server allocate is
// bounded by its bytes for each input and, across inputs, by the JSON's size and one cap for all
// of its tensors (the end-to-end tests cover the protocol; the fuzzers, the rest).
#include <gtest/gtest.h>

#include <string>

#include "server/open_inference/infer_api.h"
#include "server/open_inference/proto_infer.h"
#include "server/open_inference/rest_infer.h"

namespace lockstep::open_inference {
namespace {

// Several inputs share the JSON's bytes: their elements together cannot outnumber them, even
// when each input's shape alone could fit.
TEST(V2RequestLimitsTest, JsonInputsShareTheBodysBytes) {
  std::string ones;
  for (int i = 0; i < 100; ++i) ones += i == 0 ? "1" : ",1";
  std::string body = R"({"inputs": [{"name": "a", "datatype": "FP32", "shape": [100], "data": [)" + ones +
                     R"(]}, {"name": "b", "datatype": "BYTES", "shape": [SIZE], "data": []}]})";
  // b's shape: fewer elements than the whole body has bytes, more than a's data leaves.
  const std::string size = std::to_string(body.size() - 60);
  body.replace(body.find("SIZE"), 4, size);
  InferBodyReader reader;
  ASSERT_TRUE(reader.Start(body, "").ok());
  InferRequest request;
  const Status status = reader.ReadRequest(&request);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "input 'b': shape [" + size + "] has more elements than the request carries");
}

TEST(V2RequestLimitsTest, OneCapForAllOfARequestsTensors) {
  InferRequest request;
  // A BYTES element takes a std::string: 2^25 of them are the whole GiB.
  const Shape all{int64_t{1} << 25};
  ASSERT_EQ(all.num_elements() * static_cast<int64_t>(DTypeSize(DType::kString)), kMaxRequestTensorBytes);
  ASSERT_TRUE(TakeTensorBytes("a", DType::kString, all, &request).ok());
  const Status past = TakeTensorBytes("b", DType::kBool, Shape{1}, &request);
  EXPECT_EQ(past.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(past.message(), "input 'b': BOOL[1] would take the request's inputs past the limit of " +
                                std::to_string(kMaxRequestTensorBytes) + " bytes");
  // The next request starts with the whole cap again.
  request.Clear();
  EXPECT_TRUE(TakeTensorBytes("b", DType::kBool, Shape{1}, &request).ok());
}

TEST(V2RequestLimitsTest, GrpcRawInputsTakeFromTheCap) {
  // A raw BYTES element takes at least a byte of the message, but a std::string in the tensor:
  // 33 Mi elements fit their 33 MiB, and would take 1056 MiB.
  inference::ModelInferRequest message;
  auto* input = message.add_inputs();
  input->set_name("s");
  input->set_datatype("BYTES");
  input->add_shape(int64_t{33} << 20);
  message.add_raw_input_contents()->resize(size_t{33} << 20);
  InferRequest request;
  const Status status = ReadInferRequest(message, &request);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("past the limit of"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace lockstep::open_inference
