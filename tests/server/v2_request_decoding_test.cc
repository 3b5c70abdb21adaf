// The v2 request decoders on hostile requests: what a request may make the server allocate is
// bounded by its bytes for each input and, across inputs, by the JSON's size and one cap for all
// of its tensors; a malformed body is an error, never a crash. The end-to-end tests cover the
// protocol; the fuzzers, the rest (their findings are here, by name).
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "server/open_inference/infer_api.h"
#include "server/open_inference/proto_infer.h"
#include "server/open_inference/rest_infer.h"

namespace lockstep::open_inference {
namespace {

// Several inputs share the JSON's bytes: their elements together cannot outnumber them, even
// when each input's shape alone could fit.
TEST(V2RequestDecodingTest, JsonInputsShareTheBodysBytes) {
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

TEST(V2RequestDecodingTest, OneCapForAllOfARequestsTensors) {
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

TEST(V2RequestDecodingTest, GrpcRawInputsTakeFromTheCap) {
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


// simdjson's On-Demand parser abandons its document at the first structural error (mismatched
// brackets among them): the reader must stop there too, never ask the abandoned document again.
TEST(V2RequestDecodingTest, UnbalancedBodiesAreRefused) {
  for (const std::string body : {
           R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2], "data": [1, 0]]}]})",
           R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2], "data": Z]}]})",
           R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2], "parameters": {]], "data": [1, 0]}]})",
           R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, "data": [1, 0]}]})",
           R"({"id": "a"]], "inputs": []})",
       }) {
    InferBodyReader reader;
    InferRequest request;
    Status status = reader.Start(body, "");
    if (status.ok()) status = reader.ReadRequest(&request);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << body;
  }
}


// A shape with a zero dimension has no elements, however large the others: raw contents of
// no bytes carry it, as typed contents of no values do (the gRPC fuzzer's finding).
TEST(V2RequestDecodingTest, EmptyShapesWithLargeDimensionsNeedNoBytes) {
  for (const bool raw : {false, true}) {
    inference::ModelInferRequest message;
    auto* input = message.add_inputs();
    input->set_name("x");
    input->set_datatype("INT32");
    for (const int64_t dim : {int64_t{0}, int64_t{7}, int64_t{1} << 36}) input->add_shape(dim);
    if (raw) {
      message.add_raw_input_contents();
    } else {
      input->mutable_contents();
    }
    InferRequest request;
    const Status status = ReadInferRequest(message, &request);
    ASSERT_TRUE(status.ok()) << raw << ": " << status.ToString();
    EXPECT_EQ(request.inputs[0].tensor.num_elements(), 0);
  }
}

// JSON's fields have no order: "data" before the fields it needs (as a client that sorts its
// keys sends it) decodes to the same tensor as after them.
TEST(V2RequestDecodingTest, AnInputsFieldsComeInAnyOrder) {
  const std::string data = R"("data": [[1, 2, 3], [4, 5, 6]])";
  const std::string header = R"("name": "x", "datatype": "INT32", "shape": [2, 3])";
  for (const std::string& input : {"{" + header + ", " + data + "}", "{" + data + ", " + header + "}",
                                   R"({"shape": [2, 3], )" + data + R"(, "datatype": "INT32", "name": "x"})"}) {
    InferBodyReader reader;
    InferRequest request;
    const std::string body = R"({"inputs": [)" + input + ", " + input + "]}";
    ASSERT_TRUE(reader.Start(body, "").ok());
    const Status status = reader.ReadRequest(&request);
    ASSERT_TRUE(status.ok()) << input << ": " << status.ToString();
    ASSERT_EQ(request.num_inputs, 2u);
    for (size_t i = 0; i < 2; ++i) {
      const Tensor& t = request.inputs[i].tensor;
      EXPECT_EQ(t.shape(), (Shape{2, 3})) << input;
      EXPECT_EQ(std::vector<int32_t>(t.data<int32_t>().begin(), t.data<int32_t>().end()),
                (std::vector<int32_t>{1, 2, 3, 4, 5, 6}))
          << input;
    }
  }
  // Checked the same way in either order.
  for (const char* body : {R"({"inputs": [{"data": [1, 2], "name": "x", "datatype": "INT32", "shape": [3]}]})",
                          R"({"inputs": [{"name": "x", "datatype": "INT32", "shape": [3], "data": [1, 2]}]})"}) {
    InferBodyReader reader;
    InferRequest request;
    ASSERT_TRUE(reader.Start(body, "").ok());
    EXPECT_EQ(reader.ReadRequest(&request).message(), "input 'x': 'data' has 2 elements, but shape [3] takes 3")
        << body;
  }
  InferBodyReader reader;
  InferRequest request;
  const std::string twice = R"({"inputs": [{"name": "x", "datatype": "INT32", "shape": [1], "data": [1], "data": [2]}]})";
  ASSERT_TRUE(reader.Start(twice, "").ok());
  EXPECT_EQ(reader.ReadRequest(&request).message(), "input 'x' has 'data' twice");
}

// The narrow integers and FP16 decode from JSON, range-checked; over gRPC the integers travel
// widened in the typed contents, and a value too wide for the datatype is refused.
TEST(V2RequestDecodingTest, NarrowIntegersAndHalfFloatsDecode) {
  auto read_json = [](const std::string& datatype, const std::string& data, InferRequest* request) {
    InferBodyReader reader;
    const std::string body =
        R"({"inputs": [{"name": "x", "datatype": ")" + datatype + R"(", "shape": [2], "data": )" + data + "}]}";
    EXPECT_TRUE(reader.Start(body, "").ok());
    return reader.ReadRequest(request);
  };
  InferRequest request;
  ASSERT_TRUE(read_json("UINT8", "[0, 255]", &request).ok());
  EXPECT_EQ(request.inputs[0].tensor.dtype(), DType::kUInt8);
  EXPECT_EQ(request.inputs[0].tensor.data<uint8_t>()[1], 255);
  request.Clear();
  EXPECT_EQ(read_json("UINT8", "[0, 256]", &request).message(), "input 'x': element 1 of 'data' is not a UINT8 integer");
  request.Clear();
  EXPECT_EQ(read_json("INT8", "[-129, 0]", &request).message(), "input 'x': element 0 of 'data' is not an INT8 integer");
  request.Clear();
  ASSERT_TRUE(read_json("UINT64", "[0, 18446744073709551615]", &request).ok());
  EXPECT_EQ(request.inputs[0].tensor.data<uint64_t>()[1], std::numeric_limits<uint64_t>::max());
  request.Clear();
  ASSERT_TRUE(read_json("FP16", "[1.5, -2]", &request).ok());
  EXPECT_EQ(request.inputs[0].tensor.data<float16>()[0].bits, 0x3e00);
  request.Clear();
  EXPECT_EQ(read_json("FP16", "[1, 70000]", &request).message(),
            "input 'x': element 1 of 'data' is not a number within FP16's range");

  inference::ModelInferRequest message;
  auto* input = message.add_inputs();
  input->set_name("x");
  input->set_datatype("INT16");
  input->add_shape(2);
  input->mutable_contents()->add_int_contents(-32768);
  input->mutable_contents()->add_int_contents(32767);
  request.Clear();
  ASSERT_TRUE(ReadInferRequest(message, &request).ok());
  EXPECT_EQ(request.inputs[0].tensor.data<int16_t>()[0], -32768);
  input->mutable_contents()->set_int_contents(1, 32768);
  request.Clear();
  EXPECT_EQ(ReadInferRequest(message, &request).message(), "input 'x': value 32768 of int_contents does not fit INT16");
  input->set_datatype("FP16");
  request.Clear();
  EXPECT_EQ(ReadInferRequest(message, &request).message(),
            "input 'x': FP16 has no typed contents; send it in raw_input_contents");
}

}  // namespace
}  // namespace lockstep::open_inference
