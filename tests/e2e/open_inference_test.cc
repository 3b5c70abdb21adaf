// The Open Inference Protocol (KServe v2 / Triton) on the real model-server, over REST and gRPC,
// beside TF Serving's API on the same ports: paths and methods, every datatype the runtime has,
// nested and flat data, the binary tensor extension, errors with the server alive after them,
// the model_repository and statistics extensions, and ModelStreamInfer.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "inference/grpc_service.grpc.pb.h"
#include "tests/e2e/grpc_test_util.h"
#include "tests/e2e/http_client.h"
#include "tests/e2e/rest_test_util.h"

namespace lockstep::e2e {
namespace {

// serving_default: f FP32 [-1, -1] and i INT64 [-1, -1], echoed as f_out and i_out. "echo_<T>":
// x of datatype T [-1] echoed as y, for every datatype the runtime has.
Model TypesModel() {
  GraphBuilder g;
  const Shape matrix{-1, -1}, vector{-1};
  const std::string f = g.Input("f", DType::kFloat32, matrix);
  const std::string i = g.Input("i", DType::kInt64, matrix);
  g.AddSignature({std::string(kDefaultSignature), "tensorflow/serving/predict",
                  {{"f", f, DType::kFloat32, matrix}, {"i", i, DType::kInt64, matrix}},
                  {{"f_out", g.Op("Identity", {f}, {}, "f_out"), DType::kFloat32, matrix},
                   {"i_out", g.Op("Identity", {i}, {}, "i_out"), DType::kInt64, matrix}}});
  for (const auto& [name, dtype] : std::vector<std::pair<std::string, DType>>{
           {"FP32", DType::kFloat32}, {"FP64", DType::kFloat64}, {"BF16", DType::kBFloat16},
           {"INT32", DType::kInt32}, {"INT64", DType::kInt64}, {"BOOL", DType::kBool}, {"BYTES", DType::kString}}) {
    const std::string x = g.Input("x_" + name, dtype, vector);
    g.AddSignature({"echo_" + name, "tensorflow/serving/predict", {{"x", x, dtype, vector}},
                    {{"y", g.Op("Identity", {x}, {}, "y_" + name), dtype, vector}}});
  }
  return std::move(g).Build();
}

// Little-endian floats as raw bytes, and back.
std::string RawFloats(const std::vector<float>& values) {
  std::string raw(values.size() * sizeof(float), '\0');
  std::memcpy(raw.data(), values.data(), raw.size());
  return raw;
}
std::vector<float> FloatsOfRaw(const std::string& raw) {
  std::vector<float> out(raw.size() / sizeof(float));
  std::memcpy(out.data(), raw.data(), out.size() * sizeof(float));
  return out;
}

// Input "x" with `data`, of shape [data's length] unless `shape` says otherwise.
json XInput(const json& data, const std::string& datatype = "FP32", json shape = nullptr) {
  if (shape.is_null()) shape = json::array({data.size()});
  return {{"name", "x"}, {"datatype", datatype}, {"shape", shape}, {"data", data}};
}

class OpenInferenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir();
    const fs::path root = dir_->path();
    WriteHalfPlusTwo(root / "half_plus_two", 1);
    WriteHalfPlusTwo(root / "spare", 1);
    for (int v = 1; v <= 2; ++v) WriteVersionModel(root / "versioned", v);
    WriteModel(TypesModel(), root / "types" / "1");
    WriteFile(root / "models.config",
              ConfigText({{"half_plus_two", root / "half_plus_two", ""},
                          {"spare", root / "spare", ""},
                          {"types", root / "types", ""},
                          {"versioned", root / "versioned",
                           "model_version_policy { all {} }\n"
                           "    version_labels { key: \"stable\" value: 1 }\n"
                           "    version_labels { key: \"canary\" value: 2 }"}}));
    server_ = new ServerProcess(root, {"--model_config_file=" + (root / "models.config").string(),
                                       "--file_system_poll_wait_seconds=1"});
    channel_ = new std::shared_ptr<grpc::Channel>(MakeChannel(server_->grpc_target()));
  }
  static void TearDownTestSuite() {
    delete channel_;
    delete server_;
    delete dir_;
  }
  void SetUp() override {
    ASSERT_FALSE(server_->Exited()) << server_->Log();
    watchdog_.emplace(*server_, kTestTimeLimit);
  }
  void TearDown() override {
    watchdog_.reset();
    // Every bad request above left the server serving.
    EXPECT_EQ(Get("/v2/health/live").status, 200);
  }

  static HttpResult Get(const std::string& target) { return HttpClient(server_->rest_port()).Get(target); }
  static HttpResult Post(const std::string& target, const std::string& body,
                         const std::map<std::string, std::string>& headers = {}) {
    return HttpClient(server_->rest_port()).Request("POST", target, body, headers);
  }
  static HttpResult Infer(const std::string& model, const json& body) {
    return Post("/v2/models/" + model + "/infer", body.dump());
  }
  std::unique_ptr<inference::GRPCInferenceService::Stub> Stub() {
    return inference::GRPCInferenceService::NewStub(*channel_);
  }

  static inline ScratchDir* dir_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
  static inline std::shared_ptr<grpc::Channel>* channel_ = nullptr;
  std::optional<Watchdog> watchdog_;
};

TEST_F(OpenInferenceTest, ServerMetadataListsExactlyTheExtensionsServed) {
  const HttpResult r = Get("/v2");
  ASSERT_EQ(r.status, 200) << r.body;
  const json body = ParseBody(r);
  EXPECT_EQ(body["name"], "lockstep");
  EXPECT_FALSE(body["version"].get<std::string>().empty());
  EXPECT_EQ(body["extensions"], json({"binary_tensor_data", "model_repository", "statistics"}));

  grpc::ClientContext context;
  inference::ServerMetadataResponse response;
  ASSERT_TRUE(Stub()->ServerMetadata(&context, {}, &response).ok());
  EXPECT_EQ(response.name(), "lockstep");
  EXPECT_EQ(std::vector<std::string>(response.extensions().begin(), response.extensions().end()),
            (std::vector<std::string>{"binary_tensor_data", "model_repository", "statistics"}));
}

TEST_F(OpenInferenceTest, ModelMetadataOverRestAndGrpc) {
  const HttpResult r = Get("/v2/models/half_plus_two");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ParseBody(r), json::parse(R"({"name": "half_plus_two", "versions": ["1"], "platform": "lockstep_bundle",
      "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1]}],
      "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1]}]})"));
  EXPECT_EQ(ParseBody(Get("/v2/models/versioned"))["versions"], json({"1", "2"}));
  EXPECT_EQ(ParseBody(Get("/v2/models/versioned/versions/2"))["versions"], json({"2"}));
  EXPECT_EQ(ParseBody(Get("/v2/models/types?signature_name=echo_BYTES"))["inputs"],
            json::parse(R"([{"name": "x", "datatype": "BYTES", "shape": [-1]}])"));
  EXPECT_REST_ERROR(Get("/v2/models/nope"), 404, "nope");
  EXPECT_REST_ERROR(Get("/v2/models/versioned/versions/7"), 404, "versioned");
  EXPECT_REST_ERROR(Get("/v2/models/types?signature_name=nope"), 400, "nope");

  grpc::ClientContext context;
  inference::ModelMetadataRequest request;
  request.set_name("types");
  inference::ModelMetadataResponse response;
  ASSERT_TRUE(Stub()->ModelMetadata(&context, request, &response).ok());
  ASSERT_EQ(response.inputs_size(), 2);
  EXPECT_EQ(response.inputs(1).name(), "i");
  EXPECT_EQ(response.inputs(1).datatype(), "INT64");
  EXPECT_EQ(std::vector<int64_t>(response.inputs(1).shape().begin(), response.inputs(1).shape().end()),
            (std::vector<int64_t>{-1, -1}));

  // ModelMetadataRequest has no parameters: another signature is named in the call's metadata.
  grpc::ClientContext named;
  named.AddMetadata("signature-name", "echo_BOOL");
  inference::ModelMetadataResponse echo;
  ASSERT_TRUE(Stub()->ModelMetadata(&named, request, &echo).ok());
  ASSERT_EQ(echo.inputs_size(), 1);
  EXPECT_EQ(echo.inputs(0).datatype(), "BOOL");
}

TEST_F(OpenInferenceTest, HealthAndReadinessOverGrpc) {
  auto stub = Stub();
  {
    grpc::ClientContext context;
    inference::ServerLiveResponse response;
    ASSERT_TRUE(stub->ServerLive(&context, {}, &response).ok());
    EXPECT_TRUE(response.live());
  }
  {
    grpc::ClientContext context;
    inference::ServerReadyResponse response;
    ASSERT_TRUE(stub->ServerReady(&context, {}, &response).ok());
    EXPECT_TRUE(response.ready());
  }
  inference::ModelReadyRequest request;
  request.set_name("versioned");
  request.set_version("2");
  {
    grpc::ClientContext context;
    inference::ModelReadyResponse response;
    ASSERT_TRUE(stub->ModelReady(&context, request, &response).ok());
    EXPECT_TRUE(response.ready());
  }
  request.set_version("9");
  {
    grpc::ClientContext context;
    inference::ModelReadyResponse response;
    ASSERT_TRUE(stub->ModelReady(&context, request, &response).ok());
    EXPECT_FALSE(response.ready());
  }
  request.set_name("nope");
  grpc::ClientContext context;
  inference::ModelReadyResponse response;
  EXPECT_EQ(stub->ModelReady(&context, request, &response).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(OpenInferenceTest, RestInferAnswersAsTfServingsPredictDoes) {
  const HttpResult r = Infer("half_plus_two", {{"id", "42"}, {"inputs", {XInput({1.0, 2.0, 3.0})}}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(HeaderOf(r, "x-model-version"), "1");
  EXPECT_EQ(ParseBody(r), json::parse(R"({"model_name": "half_plus_two", "model_version": "1", "id": "42",
      "outputs": [{"name": "y", "datatype": "FP32", "shape": [3], "data": [2.5, 3.0, 3.5]}]})"));
  const HttpResult tf = Post("/v1/models/half_plus_two:predict", R"({"instances": [1.0, 2.0, 3.0]})");
  EXPECT_EQ(ParseBody(tf)["predictions"], ParseBody(r)["outputs"][0]["data"]);
}

TEST_F(OpenInferenceTest, NestedAndFlatDataAndChosenOutputs) {
  const json nested = {{"inputs",
                        {{{"name", "f"}, {"datatype", "FP32"}, {"shape", {2, 2}}, {"data", {{1, 2}, {3, 4}}}},
                         {{"name", "i"}, {"datatype", "INT64"}, {"shape", {1, 3}}, {"data", {5, -6, 9007199254740993}}}}},
                       {"outputs", {{{"name", "i_out"}}}}};
  const HttpResult r = Infer("types", nested);
  ASSERT_EQ(r.status, 200) << r.body;
  const json outputs = ParseBody(r)["outputs"];
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0], json::parse(R"({"name": "i_out", "datatype": "INT64", "shape": [1, 3],
                                        "data": [5, -6, 9007199254740993]})"));
  json flat = nested;
  flat["inputs"][0]["data"] = {1, 2, 3, 4};
  flat.erase("outputs");
  const json all = ParseBody(Infer("types", flat))["outputs"];
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0], json::parse(R"({"name": "f_out", "datatype": "FP32", "shape": [2, 2], "data": [1.0, 2.0, 3.0, 4.0]})"));
}

TEST_F(OpenInferenceTest, EveryDatatypeRoundTripsOverRestAndGrpc) {
  const std::vector<std::pair<std::string, json>> cases = {
      {"FP32", {0.5, -1.25, 3e38}}, {"FP64", {0.1, -1e300, 2.5}}, {"BF16", {1.5, -2.0, 256.0}},
      {"INT32", {1, -2147483648, 2147483647}}, {"INT64", {1, -2, 9223372036854775807}},
      {"BOOL", {true, false, true}}, {"BYTES", {"a", "", "caf\u00e9 \"q\""}}};
  for (const auto& [datatype, data] : cases) {
    const json body = {{"parameters", {{"signature_name", "echo_" + datatype}}}, {"inputs", {XInput(data, datatype)}}};
    const HttpResult r = Infer("types", body);
    ASSERT_EQ(r.status, 200) << datatype << ": " << r.body;
    const json out = ParseBody(r)["outputs"][0];
    EXPECT_EQ(out["datatype"], datatype);
    EXPECT_EQ(out["shape"], json({3}));
    EXPECT_EQ(out["data"], data) << datatype;

    // The same over gRPC, raw both ways.
    inference::ModelInferRequest request;
    request.set_model_name("types");
    (*request.mutable_parameters())["signature_name"].set_string_param("echo_" + datatype);
    auto* input = request.add_inputs();
    input->set_name("x");
    input->set_datatype(datatype);
    input->add_shape(3);
    std::string raw;
    for (const json& v : data) {
      if (datatype == "FP32") { const float f = v.get<float>(); raw.append(reinterpret_cast<const char*>(&f), 4); }
      if (datatype == "FP64") { const double d = v.get<double>(); raw.append(reinterpret_cast<const char*>(&d), 8); }
      if (datatype == "BF16") {
        const float f = v.get<float>();
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        const uint16_t half = static_cast<uint16_t>(bits >> 16);
        raw.append(reinterpret_cast<const char*>(&half), 2);
      }
      if (datatype == "INT32") { const int32_t n = v.get<int32_t>(); raw.append(reinterpret_cast<const char*>(&n), 4); }
      if (datatype == "INT64") { const int64_t n = v.get<int64_t>(); raw.append(reinterpret_cast<const char*>(&n), 8); }
      if (datatype == "BOOL") raw += static_cast<char>(v.get<bool>() ? 1 : 0);
      if (datatype == "BYTES") {
        const std::string s = v.get<std::string>();
        const uint32_t n = static_cast<uint32_t>(s.size());
        raw.append(reinterpret_cast<const char*>(&n), 4);
        raw += s;
      }
    }
    request.add_raw_input_contents(raw);
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    const grpc::Status status = Stub()->ModelInfer(&context, request, &response);
    ASSERT_TRUE(status.ok()) << datatype << ": " << Describe(status);
    ASSERT_EQ(response.raw_output_contents_size(), 1);
    EXPECT_EQ(response.raw_output_contents(0), raw) << datatype;
    EXPECT_EQ(response.outputs(0).datatype(), datatype);
  }
}

TEST_F(OpenInferenceTest, BinaryTensorExtensionBothWays) {
  const std::string header = json({{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {3}},
                                                 {"parameters", {{"binary_data_size", 12}}}}}},
                                   {"parameters", {{"binary_data_output", true}}}})
                                 .dump();
  const HttpResult r = Post("/v2/models/half_plus_two/infer", header + RawFloats({1, 2, 3}),
                            {{"Inference-Header-Content-Length", std::to_string(header.size())},
                             {"Content-Type", "application/octet-stream"}});
  ASSERT_EQ(r.status, 200) << r.body;
  const size_t json_length = std::stoul(HeaderOf(r, "inference-header-content-length"));
  ASSERT_LE(json_length, r.body.size());
  const json answer = json::parse(r.body.substr(0, json_length));
  EXPECT_EQ(answer["outputs"][0]["parameters"]["binary_data_size"], 12);
  EXPECT_FALSE(answer["outputs"][0].contains("data"));
  EXPECT_EQ(FloatsOfRaw(r.body.substr(json_length)), (std::vector<float>{2.5f, 3.0f, 3.5f}));

  // An output's own binary_data: false wins over the request's default, and BYTES travel
  // length-prefixed.
  std::string bytes;
  for (const std::string s : {"ab", "", "xyz"}) {
    const uint32_t n = static_cast<uint32_t>(s.size());
    bytes.append(reinterpret_cast<const char*>(&n), 4);
    bytes += s;
  }
  const std::string header2 =
      json({{"parameters", {{"signature_name", "echo_BYTES"}, {"binary_data_output", true}}},
            {"inputs", {{{"name", "x"}, {"datatype", "BYTES"}, {"shape", {3}},
                         {"parameters", {{"binary_data_size", bytes.size()}}}}}},
            {"outputs", {{{"name", "y"}, {"parameters", {{"binary_data", false}}}}}}})
          .dump();
  const HttpResult r2 = Post("/v2/models/types/infer", header2 + bytes,
                             {{"Inference-Header-Content-Length", std::to_string(header2.size())}});
  ASSERT_EQ(r2.status, 200) << r2.body;
  EXPECT_EQ(HeaderOf(r2, "inference-header-content-length"), "");
  EXPECT_EQ(ParseBody(r2)["outputs"][0]["data"], json({"ab", "", "xyz"}));
}

TEST_F(OpenInferenceTest, BadRequestsAreRefusedWithTheRightStatusAndMessage) {
  const json good = {{"inputs", {XInput({1.0, 2.0, 3.0})}}};
  EXPECT_REST_ERROR(Infer("nope", good), 404, "nope");
  EXPECT_REST_ERROR(Post("/v2/models/half_plus_two/versions/9/infer", good.dump()), 404, "half_plus_two");
  json unknown = good;
  unknown["inputs"][0]["name"] = "z";
  EXPECT_REST_ERROR(Infer("half_plus_two", unknown), 400, "unknown input 'z'");
  EXPECT_REST_ERROR(Infer("types", good), 400, "unknown input 'x'");
  EXPECT_REST_ERROR(Infer("half_plus_two", {{"inputs", json::array()}}), 400, "input 'x' of signature");
  EXPECT_REST_ERROR(Infer("half_plus_two", {{"inputs", {XInput({1.0, 2.0}, "FP32", {3})}}}), 400,
                    "'data' has 2 elements, but shape [3] takes 3");
  EXPECT_REST_ERROR(Infer("half_plus_two", {{"inputs", {XInput({1.0, 2.0, 3.0, 4.0}, "FP32", {3})}}}), 400,
                    "more elements");
  EXPECT_REST_ERROR(Infer("half_plus_two", {{"inputs", {XInput({1, 2, 3}, "INT32")}}}), 400,
                    "has datatype INT32, but the model takes FP32");
  EXPECT_REST_ERROR(Infer("half_plus_two", {{"inputs", {XInput({1, 2, 3}, "FP16")}}}), 400,
                    "has datatype FP16, but the model takes FP32");
  EXPECT_REST_ERROR(Infer("half_plus_two", {{"inputs", {XInput({1, 2, 3}, "COMPLEX")}}}), 400, "unknown datatype");
  EXPECT_REST_ERROR(Infer("half_plus_two", {{"inputs", {XInput({"a", "b", "c"})}}}), 400, "is not a number");
  EXPECT_REST_ERROR(Infer("half_plus_two", {{"inputs", {XInput({1.0}, "FP32", {-1})}}}), 400, "negative");
  EXPECT_REST_ERROR(Infer("half_plus_two", {{"inputs", {XInput({1.0}, "FP32", {100000, 100000, 100000})}}}), 400,
                    "more elements than the request carries");
  json bad_output = good;
  bad_output["outputs"] = {{{"name", "nope"}}};
  EXPECT_REST_ERROR(Infer("half_plus_two", bad_output), 400, "unknown output 'nope'");
  EXPECT_REST_ERROR(Post("/v2/models/half_plus_two/infer", "{\"inputs\": ["), 400, "malformed");
  EXPECT_REST_ERROR(Post("/v2/models/half_plus_two/infer", "[1]"), 400, "not a JSON object");
  // Unbalanced brackets after a value once made the reader ask simdjson's abandoned document
  // again, a null dereference that took the server down.
  EXPECT_REST_ERROR(Post("/v2/models/half_plus_two/infer",
                         R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [3], "data": [1, 2, 3]]}]})"),
                    400, "malformed");

  // The binary extension's own errors.
  const std::string header = json({{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {3}},
                                                 {"parameters", {{"binary_data_size", 16}}}}}}})
                                 .dump();
  const std::string body = header + RawFloats({1, 2, 3});
  const std::string length = std::to_string(header.size());
  EXPECT_REST_ERROR(Post("/v2/models/half_plus_two/infer", body, {{"Inference-Header-Content-Length", length}}), 400,
                    "runs past the body's binary data");
  EXPECT_REST_ERROR(Post("/v2/models/half_plus_two/infer", body, {{"Inference-Header-Content-Length", "99999"}}), 400,
                    "beyond the body");
  EXPECT_REST_ERROR(Post("/v2/models/half_plus_two/infer", body, {{"Inference-Header-Content-Length", "x1"}}), 400,
                    "not a number");
  EXPECT_REST_ERROR(Post("/v2/models/half_plus_two/infer", body), 400, "malformed");
  const std::string header8 = json({{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {3}},
                                                  {"parameters", {{"binary_data_size", 8}}}}}}})
                                  .dump();
  EXPECT_REST_ERROR(Post("/v2/models/half_plus_two/infer", header8 + RawFloats({1, 2}),
                         {{"Inference-Header-Content-Length", std::to_string(header8.size())}}),
                    400, "8 bytes of raw contents");
  EXPECT_REST_ERROR(Get("/v2/models/half_plus_two/infer"), 400, "use POST");
  EXPECT_REST_ERROR(Get("/v2/nothing"), 404, "Unknown path");

  // gRPC: the same checks, as status codes.
  inference::ModelInferRequest request;
  request.set_model_name("nope");
  auto* input = request.add_inputs();
  input->set_name("x");
  input->set_datatype("FP32");
  input->add_shape(2);
  input->mutable_contents()->add_fp32_contents(1);
  input->mutable_contents()->add_fp32_contents(2);
  auto infer = [&](grpc::StatusCode code, const std::string& message) {
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    const grpc::Status status = Stub()->ModelInfer(&context, request, &response);
    EXPECT_EQ(status.error_code(), code) << Describe(status);
    EXPECT_PRED2(Contains, status.error_message(), message);
  };
  infer(grpc::StatusCode::NOT_FOUND, "nope");
  request.set_model_name("half_plus_two");
  input->set_shape(0, 3);
  infer(grpc::StatusCode::INVALID_ARGUMENT, "2 values in fp32_contents, but shape [3] takes 3");
  input->set_shape(0, 2);
  // Values in the field of another datatype than the one declared; then a consistent FP64 input
  // for a model that takes FP32.
  input->set_datatype("FP64");
  infer(grpc::StatusCode::INVALID_ARGUMENT, "0 values in fp64_contents, but shape [2] takes 2");
  input->mutable_contents()->add_fp64_contents(1.0);
  input->mutable_contents()->add_fp64_contents(2.0);
  infer(grpc::StatusCode::INVALID_ARGUMENT, "has datatype FP64, but the model takes FP32");
  input->set_datatype("FP32");
  request.add_raw_input_contents(RawFloats({1}));
  infer(grpc::StatusCode::INVALID_ARGUMENT, "4 bytes of raw contents");
}

TEST_F(OpenInferenceTest, VersionsAndLabelsRouteAsTfServingsApiDoes) {
  const json body = {{"inputs", {XInput({1.0})}}};
  auto served = [&](const std::string& path) {
    const HttpResult r = Post(path, body.dump());
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    return ParseBody(r)["model_version"];
  };
  EXPECT_EQ(served("/v2/models/versioned/infer"), "2");
  EXPECT_EQ(served("/v2/models/versioned/versions/1/infer"), "1");
  EXPECT_EQ(served("/v2/models/versioned/versions/stable/infer"), "1");
  EXPECT_EQ(served("/v2/models/versioned/versions/canary/infer"), "2");
  EXPECT_REST_ERROR(Post("/v2/models/versioned/versions/beta/infer", body.dump()), 404, "beta");
}

TEST_F(OpenInferenceTest, StatisticsCountWhatEachVersionAnswered) {
  auto count = [&]() -> uint64_t {
    const HttpResult r = Get("/v2/models/versioned/versions/1/stats");
    EXPECT_EQ(r.status, 200) << r.body;
    const json stats = ParseBody(r)["model_stats"];
    if (stats.empty()) return 0;
    EXPECT_EQ(stats.size(), 1u);
    EXPECT_EQ(stats[0]["version"], "1");
    return stats[0]["inference_stats"]["success"]["count"].get<uint64_t>();
  };
  const uint64_t before = count();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Post("/v2/models/versioned/versions/1/infer", json({{"inputs", {XInput({1.0})}}}).dump()).status, 200);
  }
  EXPECT_EQ(count(), before + 3);
  // Every model's: one entry per version that answered.
  const json all = ParseBody(Get("/v2/models/stats"))["model_stats"];
  EXPECT_TRUE(std::any_of(all.begin(), all.end(), [](const json& s) { return s["name"] == "versioned"; })) << all;
  EXPECT_REST_ERROR(Get("/v2/models/nope/stats"), 404, "nope");

  grpc::ClientContext context;
  inference::ModelStatisticsRequest request;
  request.set_name("versioned");
  request.set_version("1");
  inference::ModelStatisticsResponse response;
  ASSERT_TRUE(Stub()->ModelStatistics(&context, request, &response).ok());
  ASSERT_EQ(response.model_stats_size(), 1);
  EXPECT_EQ(response.model_stats(0).inference_stats().success().count(), before + 3);
  EXPECT_GT(response.model_stats(0).inference_stats().success().ns(), 0u);

  // The v2 protocol has its own label value in the metrics.
  EXPECT_PRED2(Contains, Get("/metrics").body, "protocol=\"rest_v2\"");
}

TEST_F(OpenInferenceTest, RepositoryUnloadsAndLoadsAModelOfTheConfig) {
  auto state_of = [&](const std::string& model) {
    const HttpResult r = Post("/v2/repository/index", "{}");
    EXPECT_EQ(r.status, 200) << r.body;
    for (const json& m : ParseBody(r)) {
      if (m["name"] == model) return m["state"].get<std::string>();
    }
    return std::string("absent");
  };
  const json body = {{"inputs", {XInput({1.0})}}};
  EXPECT_EQ(state_of("spare"), "READY");
  // A page in the host's browser is not the host: a form's POST to the loopback is refused.
  EXPECT_REST_ERROR(Post("/v2/repository/models/spare/unload", "", {{"Origin", "https://example.com"}}), 403,
                    "refused from a web page");
  EXPECT_EQ(state_of("spare"), "READY");
  ASSERT_EQ(Post("/v2/repository/models/spare/unload", "").status, 200);
  EXPECT_EQ(state_of("spare"), "UNAVAILABLE");
  EXPECT_REST_ERROR(Infer("spare", body), 404, "spare");
  EXPECT_EQ(Get("/v2/models/spare/ready").status, 404);
  EXPECT_EQ(Get("/v2/health/ready").status, 200);  // readiness counts the models served
  for (const json& m : ParseBody(Post("/v2/repository/index", R"({"ready": true})"))) EXPECT_NE(m["name"], "spare");

  // gRPC's load brings it back, and returns once it is served.
  grpc::ClientContext context;
  inference::RepositoryModelLoadRequest load;
  load.set_model_name("spare");
  inference::RepositoryModelLoadResponse loaded;
  const grpc::Status status = Stub()->RepositoryModelLoad(&context, load, &loaded);
  ASSERT_TRUE(status.ok()) << Describe(status);
  EXPECT_EQ(state_of("spare"), "READY");
  EXPECT_EQ(Infer("spare", body).status, 200);
  EXPECT_REST_ERROR(Post("/v2/repository/models/nope/load", ""), 404, "not in the server's model config");
}

TEST_F(OpenInferenceTest, StreamInferAnswersEveryRequestWithItsId) {
  grpc::ClientContext context;
  auto stream = Stub()->ModelStreamInfer(&context);
  for (int i = 0; i < 4; ++i) {
    inference::ModelInferRequest request;
    request.set_model_name(i == 2 ? "nope" : "half_plus_two");
    request.set_id("req-" + std::to_string(i));
    auto* input = request.add_inputs();
    input->set_name("x");
    input->set_datatype("FP32");
    input->add_shape(1);
    input->mutable_contents()->add_fp32_contents(static_cast<float>(i));
    ASSERT_TRUE(stream->Write(request));
  }
  stream->WritesDone();
  std::map<std::string, inference::ModelStreamInferResponse> answers;
  inference::ModelStreamInferResponse answer;
  while (stream->Read(&answer)) answers[answer.infer_response().id()] = answer;
  const grpc::Status status = stream->Finish();
  ASSERT_TRUE(status.ok()) << Describe(status);
  ASSERT_EQ(answers.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const inference::ModelStreamInferResponse& a = answers["req-" + std::to_string(i)];
    if (i == 2) {
      EXPECT_PRED2(Contains, a.error_message(), "nope");
      continue;
    }
    EXPECT_EQ(a.error_message(), "");
    ASSERT_EQ(a.infer_response().raw_output_contents_size(), 1);
    EXPECT_EQ(FloatsOfRaw(a.infer_response().raw_output_contents(0)), std::vector<float>{0.5f * i + 2.0f});
  }
}

}  // namespace
}  // namespace lockstep::e2e
