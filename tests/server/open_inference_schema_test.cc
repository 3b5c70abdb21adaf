// The Open Inference Protocol's gRPC schema (proto/inference/grpc_service.proto) must match
// upstream's field for field, as TF Serving's must (proto_schema_test.cc): every message, field
// and method that docs/open-inference-protocol.md lists, with the Triton additions we serve
// (streaming, model repository, statistics), through the generated descriptors.
#include <gtest/gtest.h>

#include "inference/grpc_service.grpc.pb.h"
#include "inference/grpc_service.pb.h"
#include "tests/server/proto_schema_util.h"

namespace {

using namespace lockstep::schema_test;
namespace oip = inference;

TEST(ProtoSchemaTest, V2HealthAndMetadata) {
  ExpectMessage(oip::ServerLiveRequest::descriptor(), "inference.ServerLiveRequest", {});
  ExpectMessage(oip::ServerLiveResponse::descriptor(), "inference.ServerLiveResponse", {{"live", 1}});
  ExpectKinds(oip::ServerLiveResponse::descriptor(), {{"live", FD::TYPE_BOOL}});
  ExpectMessage(oip::ServerReadyRequest::descriptor(), "inference.ServerReadyRequest", {});
  ExpectMessage(oip::ServerReadyResponse::descriptor(), "inference.ServerReadyResponse", {{"ready", 1}});
  ExpectKinds(oip::ServerReadyResponse::descriptor(), {{"ready", FD::TYPE_BOOL}});
  ExpectMessage(oip::ModelReadyRequest::descriptor(), "inference.ModelReadyRequest",
                {{"name", 1}, {"version", 2}});
  ExpectKinds(oip::ModelReadyRequest::descriptor(), {{"name", FD::TYPE_STRING}, {"version", FD::TYPE_STRING}});
  ExpectMessage(oip::ModelReadyResponse::descriptor(), "inference.ModelReadyResponse", {{"ready", 1}});
  ExpectKinds(oip::ModelReadyResponse::descriptor(), {{"ready", FD::TYPE_BOOL}});
  ExpectMessage(oip::ServerMetadataRequest::descriptor(), "inference.ServerMetadataRequest", {});
  ExpectMessage(oip::ServerMetadataResponse::descriptor(), "inference.ServerMetadataResponse",
                {{"name", 1}, {"version", 2}, {"extensions", 3}});
  ExpectKinds(oip::ServerMetadataResponse::descriptor(),
              {{"name", FD::TYPE_STRING}, {"version", FD::TYPE_STRING}, {"extensions", FD::TYPE_STRING, true}});
  ExpectMessage(oip::ModelMetadataRequest::descriptor(), "inference.ModelMetadataRequest",
                {{"name", 1}, {"version", 2}});
  ExpectKinds(oip::ModelMetadataRequest::descriptor(), {{"name", FD::TYPE_STRING}, {"version", FD::TYPE_STRING}});
  ExpectMessage(oip::ModelMetadataResponse::descriptor(), "inference.ModelMetadataResponse",
                {{"name", 1},
                 {"versions", 2},
                 {"platform", 3},
                 {"inputs", 4, "inference.ModelMetadataResponse.TensorMetadata"},
                 {"outputs", 5, "inference.ModelMetadataResponse.TensorMetadata"}});
  ExpectKinds(oip::ModelMetadataResponse::descriptor(),
              {{"name", FD::TYPE_STRING},
               {"versions", FD::TYPE_STRING, true},
               {"platform", FD::TYPE_STRING},
               {"inputs", FD::TYPE_MESSAGE, true},
               {"outputs", FD::TYPE_MESSAGE, true}});
  ExpectMessage(oip::ModelMetadataResponse::TensorMetadata::descriptor(),
                "inference.ModelMetadataResponse.TensorMetadata", {{"name", 1}, {"datatype", 2}, {"shape", 3}});
  ExpectKinds(oip::ModelMetadataResponse::TensorMetadata::descriptor(),
              {{"name", FD::TYPE_STRING}, {"datatype", FD::TYPE_STRING}, {"shape", FD::TYPE_INT64, true}});
}

TEST(ProtoSchemaTest, V2InferRequestAndResponse) {
  ExpectMessage(oip::ModelInferRequest::descriptor(), "inference.ModelInferRequest",
                {{"model_name", 1},
                 {"model_version", 2},
                 {"id", 3},
                 {"parameters", 4, "inference.InferParameter"},
                 {"inputs", 5, "inference.ModelInferRequest.InferInputTensor"},
                 {"outputs", 6, "inference.ModelInferRequest.InferRequestedOutputTensor"},
                 {"raw_input_contents", 7}});
  ExpectKinds(oip::ModelInferRequest::descriptor(),
              {{"model_name", FD::TYPE_STRING},
               {"model_version", FD::TYPE_STRING},
               {"id", FD::TYPE_STRING},
               {"inputs", FD::TYPE_MESSAGE, true},
               {"outputs", FD::TYPE_MESSAGE, true},
               {"raw_input_contents", FD::TYPE_BYTES, true}});
  ExpectStringMap(oip::ModelInferRequest::descriptor(), "parameters");
  ExpectMessage(oip::ModelInferRequest::InferInputTensor::descriptor(),
                "inference.ModelInferRequest.InferInputTensor",
                {{"name", 1},
                 {"datatype", 2},
                 {"shape", 3},
                 {"parameters", 4, "inference.InferParameter"},
                 {"contents", 5, "inference.InferTensorContents"}});
  ExpectKinds(oip::ModelInferRequest::InferInputTensor::descriptor(),
              {{"name", FD::TYPE_STRING},
               {"datatype", FD::TYPE_STRING},
               {"shape", FD::TYPE_INT64, true},
               {"contents", FD::TYPE_MESSAGE}});
  ExpectStringMap(oip::ModelInferRequest::InferInputTensor::descriptor(), "parameters");
  ExpectMessage(oip::ModelInferRequest::InferRequestedOutputTensor::descriptor(),
                "inference.ModelInferRequest.InferRequestedOutputTensor",
                {{"name", 1}, {"parameters", 2, "inference.InferParameter"}});
  ExpectKinds(oip::ModelInferRequest::InferRequestedOutputTensor::descriptor(), {{"name", FD::TYPE_STRING}});
  ExpectStringMap(oip::ModelInferRequest::InferRequestedOutputTensor::descriptor(), "parameters");

  ExpectMessage(oip::ModelInferResponse::descriptor(), "inference.ModelInferResponse",
                {{"model_name", 1},
                 {"model_version", 2},
                 {"id", 3},
                 {"parameters", 4, "inference.InferParameter"},
                 {"outputs", 5, "inference.ModelInferResponse.InferOutputTensor"},
                 {"raw_output_contents", 6}});
  ExpectKinds(oip::ModelInferResponse::descriptor(),
              {{"model_name", FD::TYPE_STRING},
               {"model_version", FD::TYPE_STRING},
               {"id", FD::TYPE_STRING},
               {"outputs", FD::TYPE_MESSAGE, true},
               {"raw_output_contents", FD::TYPE_BYTES, true}});
  ExpectStringMap(oip::ModelInferResponse::descriptor(), "parameters");
  ExpectMessage(oip::ModelInferResponse::InferOutputTensor::descriptor(),
                "inference.ModelInferResponse.InferOutputTensor",
                {{"name", 1},
                 {"datatype", 2},
                 {"shape", 3},
                 {"parameters", 4, "inference.InferParameter"},
                 {"contents", 5, "inference.InferTensorContents"}});
  ExpectKinds(oip::ModelInferResponse::InferOutputTensor::descriptor(),
              {{"name", FD::TYPE_STRING},
               {"datatype", FD::TYPE_STRING},
               {"shape", FD::TYPE_INT64, true},
               {"contents", FD::TYPE_MESSAGE}});
  ExpectStringMap(oip::ModelInferResponse::InferOutputTensor::descriptor(), "parameters");

  ExpectMessage(oip::InferParameter::descriptor(), "inference.InferParameter",
                {{"bool_param", 1, "", "parameter_choice"},
                 {"int64_param", 2, "", "parameter_choice"},
                 {"string_param", 3, "", "parameter_choice"},
                 {"double_param", 4, "", "parameter_choice"},
                 {"uint64_param", 5, "", "parameter_choice"}});
  ExpectKinds(oip::InferParameter::descriptor(),
              {{"bool_param", FD::TYPE_BOOL},
               {"int64_param", FD::TYPE_INT64},
               {"string_param", FD::TYPE_STRING},
               {"double_param", FD::TYPE_DOUBLE},
               {"uint64_param", FD::TYPE_UINT64}});

  ExpectMessage(oip::InferTensorContents::descriptor(), "inference.InferTensorContents",
                {{"bool_contents", 1},
                 {"int_contents", 2},
                 {"int64_contents", 3},
                 {"uint_contents", 4},
                 {"uint64_contents", 5},
                 {"fp32_contents", 6},
                 {"fp64_contents", 7},
                 {"bytes_contents", 8}});
  ExpectKinds(oip::InferTensorContents::descriptor(),
              {{"bool_contents", FD::TYPE_BOOL, true},
               {"int_contents", FD::TYPE_INT32, true},
               {"int64_contents", FD::TYPE_INT64, true},
               {"uint_contents", FD::TYPE_UINT32, true},
               {"uint64_contents", FD::TYPE_UINT64, true},
               {"fp32_contents", FD::TYPE_FLOAT, true},
               {"fp64_contents", FD::TYPE_DOUBLE, true},
               {"bytes_contents", FD::TYPE_BYTES, true}});

  ExpectMessage(oip::ModelStreamInferResponse::descriptor(), "inference.ModelStreamInferResponse",
                {{"error_message", 1}, {"infer_response", 2, "inference.ModelInferResponse"}});
  ExpectKinds(oip::ModelStreamInferResponse::descriptor(),
              {{"error_message", FD::TYPE_STRING}, {"infer_response", FD::TYPE_MESSAGE}});
}

TEST(ProtoSchemaTest, V2Statistics) {
  ExpectMessage(oip::ModelStatisticsRequest::descriptor(), "inference.ModelStatisticsRequest",
                {{"name", 1}, {"version", 2}});
  ExpectKinds(oip::ModelStatisticsRequest::descriptor(), {{"name", FD::TYPE_STRING}, {"version", FD::TYPE_STRING}});
  ExpectMessage(oip::ModelStatisticsResponse::descriptor(), "inference.ModelStatisticsResponse",
                {{"model_stats", 1, "inference.ModelStatistics"}});
  ExpectKinds(oip::ModelStatisticsResponse::descriptor(), {{"model_stats", FD::TYPE_MESSAGE, true}});
  ExpectMessage(oip::ModelStatistics::descriptor(), "inference.ModelStatistics",
                {{"name", 1},
                 {"version", 2},
                 {"last_inference", 3},
                 {"inference_count", 4},
                 {"execution_count", 5},
                 {"inference_stats", 6, "inference.InferStatistics"},
                 {"batch_stats", 7, "inference.InferBatchStatistics"},
                 {"memory_usage", 8, "inference.MemoryUsage"}});
  ExpectKinds(oip::ModelStatistics::descriptor(),
              {{"name", FD::TYPE_STRING},
               {"version", FD::TYPE_STRING},
               {"last_inference", FD::TYPE_UINT64},
               {"inference_count", FD::TYPE_UINT64},
               {"execution_count", FD::TYPE_UINT64},
               {"inference_stats", FD::TYPE_MESSAGE},
               {"batch_stats", FD::TYPE_MESSAGE, true},
               {"memory_usage", FD::TYPE_MESSAGE, true}});
  ExpectMessage(oip::StatisticDuration::descriptor(), "inference.StatisticDuration", {{"count", 1}, {"ns", 2}});
  ExpectKinds(oip::StatisticDuration::descriptor(), {{"count", FD::TYPE_UINT64}, {"ns", FD::TYPE_UINT64}});
  ExpectMessage(oip::InferStatistics::descriptor(), "inference.InferStatistics",
                {{"success", 1, "inference.StatisticDuration"},
                 {"fail", 2, "inference.StatisticDuration"},
                 {"queue", 3, "inference.StatisticDuration"},
                 {"compute_input", 4, "inference.StatisticDuration"},
                 {"compute_infer", 5, "inference.StatisticDuration"},
                 {"compute_output", 6, "inference.StatisticDuration"},
                 {"cache_hit", 7, "inference.StatisticDuration"},
                 {"cache_miss", 8, "inference.StatisticDuration"}});
  for (int i = 0; i < oip::InferStatistics::descriptor()->field_count(); ++i) {
    EXPECT_FALSE(oip::InferStatistics::descriptor()->field(i)->is_repeated());
  }
  ExpectMessage(oip::InferBatchStatistics::descriptor(), "inference.InferBatchStatistics",
                {{"batch_size", 1},
                 {"compute_input", 2, "inference.StatisticDuration"},
                 {"compute_infer", 3, "inference.StatisticDuration"},
                 {"compute_output", 4, "inference.StatisticDuration"}});
  ExpectKinds(oip::InferBatchStatistics::descriptor(),
              {{"batch_size", FD::TYPE_UINT64},
               {"compute_input", FD::TYPE_MESSAGE},
               {"compute_infer", FD::TYPE_MESSAGE},
               {"compute_output", FD::TYPE_MESSAGE}});
  ExpectMessage(oip::MemoryUsage::descriptor(), "inference.MemoryUsage",
                {{"type", 1}, {"id", 2}, {"byte_size", 3}});
  ExpectKinds(oip::MemoryUsage::descriptor(),
              {{"type", FD::TYPE_STRING}, {"id", FD::TYPE_INT64}, {"byte_size", FD::TYPE_UINT64}});
}

TEST(ProtoSchemaTest, V2ModelRepository) {
  ExpectMessage(oip::ModelRepositoryParameter::descriptor(), "inference.ModelRepositoryParameter",
                {{"bool_param", 1, "", "parameter_choice"},
                 {"int64_param", 2, "", "parameter_choice"},
                 {"string_param", 3, "", "parameter_choice"},
                 {"bytes_param", 4, "", "parameter_choice"}});
  ExpectKinds(oip::ModelRepositoryParameter::descriptor(),
              {{"bool_param", FD::TYPE_BOOL},
               {"int64_param", FD::TYPE_INT64},
               {"string_param", FD::TYPE_STRING},
               {"bytes_param", FD::TYPE_BYTES}});
  ExpectMessage(oip::RepositoryIndexRequest::descriptor(), "inference.RepositoryIndexRequest",
                {{"repository_name", 1}, {"ready", 2}});
  ExpectKinds(oip::RepositoryIndexRequest::descriptor(),
              {{"repository_name", FD::TYPE_STRING}, {"ready", FD::TYPE_BOOL}});
  ExpectMessage(oip::RepositoryIndexResponse::descriptor(), "inference.RepositoryIndexResponse",
                {{"models", 1, "inference.RepositoryIndexResponse.ModelIndex"}});
  ExpectKinds(oip::RepositoryIndexResponse::descriptor(), {{"models", FD::TYPE_MESSAGE, true}});
  ExpectMessage(oip::RepositoryIndexResponse::ModelIndex::descriptor(), "inference.RepositoryIndexResponse.ModelIndex",
                {{"name", 1}, {"version", 2}, {"state", 3}, {"reason", 4}});
  ExpectKinds(oip::RepositoryIndexResponse::ModelIndex::descriptor(),
              {{"name", FD::TYPE_STRING}, {"version", FD::TYPE_STRING}, {"state", FD::TYPE_STRING},
               {"reason", FD::TYPE_STRING}});
  // Load and unload requests have the same fields.
  const std::vector<std::pair<const gp::Descriptor*, const char*>> load_unload = {
      {oip::RepositoryModelLoadRequest::descriptor(), "inference.RepositoryModelLoadRequest"},
      {oip::RepositoryModelUnloadRequest::descriptor(), "inference.RepositoryModelUnloadRequest"}};
  for (const auto& [d, full_name] : load_unload) {
    ExpectMessage(d, full_name,
                  {{"repository_name", 1}, {"model_name", 2}, {"parameters", 3, "inference.ModelRepositoryParameter"}});
    ExpectKinds(d, {{"repository_name", FD::TYPE_STRING}, {"model_name", FD::TYPE_STRING}});
    ExpectStringMap(d, "parameters");
  }
  ExpectMessage(oip::RepositoryModelLoadResponse::descriptor(), "inference.RepositoryModelLoadResponse", {});
  ExpectMessage(oip::RepositoryModelUnloadResponse::descriptor(), "inference.RepositoryModelUnloadResponse", {});
}

TEST(ProtoSchemaTest, V2Service) {
  static_assert(sizeof(oip::GRPCInferenceService::Service) > 0);
  // Clients call /inference.GRPCInferenceService/<Method>; the order is Triton's, less the
  // methods we do not serve.
  ExpectService(oip::ModelInferRequest::descriptor()->file()->pool()->FindServiceByName(
                    "inference.GRPCInferenceService"),
                "inference.GRPCInferenceService",
                {{"ServerLive", "inference.ServerLiveRequest", "inference.ServerLiveResponse"},
                 {"ServerReady", "inference.ServerReadyRequest", "inference.ServerReadyResponse"},
                 {"ModelReady", "inference.ModelReadyRequest", "inference.ModelReadyResponse"},
                 {"ServerMetadata", "inference.ServerMetadataRequest", "inference.ServerMetadataResponse"},
                 {"ModelMetadata", "inference.ModelMetadataRequest", "inference.ModelMetadataResponse"},
                 {"ModelInfer", "inference.ModelInferRequest", "inference.ModelInferResponse"},
                 {"ModelStreamInfer", "inference.ModelInferRequest", "inference.ModelStreamInferResponse",
                  /*client_streaming=*/true, /*server_streaming=*/true},
                 {"ModelStatistics", "inference.ModelStatisticsRequest", "inference.ModelStatisticsResponse"},
                 {"RepositoryIndex", "inference.RepositoryIndexRequest", "inference.RepositoryIndexResponse"},
                 {"RepositoryModelLoad", "inference.RepositoryModelLoadRequest",
                  "inference.RepositoryModelLoadResponse"},
                 {"RepositoryModelUnload", "inference.RepositoryModelUnloadRequest",
                  "inference.RepositoryModelUnloadResponse"}});
  EXPECT_EQ(oip::ModelInferRequest::descriptor()->file()->package(), "inference");
}

}  // namespace
