// Our .proto files must match TensorFlow / TensorFlow Serving's public API field for field:
// clients encode with upstream's definitions, so a wrong number is a silent wire
// incompatibility. These tests pin every message, field, enum value and service method that
// docs/tf-serving-api.md lists, through the generated descriptors (the Open Inference
// Protocol's: open_inference_schema_test.cc).
#include <gtest/gtest.h>

#include <google/protobuf/wrappers.pb.h>

#include <string>
#include <vector>

#include "tensorflow/core/example/example.pb.h"
#include "tensorflow/core/example/feature.pb.h"
#include "tensorflow/core/framework/tensor.pb.h"
#include "tensorflow/core/framework/tensor_shape.pb.h"
#include "tensorflow/core/framework/types.pb.h"
#include "tensorflow/core/protobuf/error_codes.pb.h"
#include "tensorflow/core/protobuf/meta_graph.pb.h"
#include "tensorflow_serving/apis/classification.pb.h"
#include "tensorflow_serving/apis/get_model_metadata.pb.h"
#include "tensorflow_serving/apis/get_model_status.pb.h"
#include "tensorflow_serving/apis/inference.pb.h"
#include "tensorflow_serving/apis/input.pb.h"
#include "tensorflow_serving/apis/model.pb.h"
#include "tensorflow_serving/apis/model_management.pb.h"
#include "tensorflow_serving/apis/model_service.grpc.pb.h"
#include "tensorflow_serving/apis/predict.pb.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"
#include "tensorflow_serving/apis/regression.pb.h"
#include "tensorflow_serving/config/logging_config.pb.h"
#include "tensorflow_serving/config/model_server_config.pb.h"
#include "tensorflow_serving/config/monitoring_config.pb.h"
#include "tensorflow_serving/servables/tensorflow/session_bundle_config.pb.h"
#include "tensorflow_serving/sources/storage_path/file_system_storage_path_source.pb.h"
#include "tensorflow_serving/util/status.pb.h"
#include "tests/server/proto_schema_util.h"

namespace {

using namespace lockstep::schema_test;
namespace tf = tensorflow;
namespace tfs = tensorflow::serving;
using VersionPolicy = tfs::FileSystemStoragePathSourceConfig::ServableVersionPolicy;

TEST(ProtoSchemaTest, ModelSpecAndPredict) {
  ExpectMessage(tfs::ModelSpec::descriptor(), "tensorflow.serving.ModelSpec",
                {{"name", 1},
                 {"version", 2, "google.protobuf.Int64Value", "version_choice"},
                 {"version_label", 4, "", "version_choice"},
                 {"signature_name", 3}});
  ExpectMessage(tfs::PredictRequest::descriptor(), "tensorflow.serving.PredictRequest",
                {{"model_spec", 1, "tensorflow.serving.ModelSpec"},
                 {"inputs", 2, "tensorflow.TensorProto"},
                 {"output_filter", 3},
                 {"client_id", 6}});
  EXPECT_TRUE(tfs::PredictRequest::descriptor()->IsReservedNumber(4));
  EXPECT_TRUE(tfs::PredictRequest::descriptor()->FindFieldByName("inputs")->is_map());
  EXPECT_TRUE(tfs::PredictRequest::descriptor()->FindFieldByName("output_filter")->is_repeated());
  EXPECT_TRUE(tfs::PredictRequest::descriptor()->FindFieldByName("client_id")->has_presence());
  ExpectMessage(tfs::PredictResponse::descriptor(), "tensorflow.serving.PredictResponse",
                {{"model_spec", 2, "tensorflow.serving.ModelSpec"},
                 {"outputs", 1, "tensorflow.TensorProto"}});
}

TEST(ProtoSchemaTest, ClassifyRegressAndInput) {
  ExpectMessage(tfs::Class::descriptor(), "tensorflow.serving.Class", {{"label", 1}, {"score", 2}});
  ExpectMessage(tfs::Classifications::descriptor(), "tensorflow.serving.Classifications",
                {{"classes", 1, "tensorflow.serving.Class"}});
  ExpectMessage(tfs::ClassificationResult::descriptor(), "tensorflow.serving.ClassificationResult",
                {{"classifications", 1, "tensorflow.serving.Classifications"}});
  ExpectMessage(tfs::ClassificationRequest::descriptor(), "tensorflow.serving.ClassificationRequest",
                {{"model_spec", 1, "tensorflow.serving.ModelSpec"},
                 {"input", 2, "tensorflow.serving.Input"}});
  ExpectMessage(tfs::ClassificationResponse::descriptor(), "tensorflow.serving.ClassificationResponse",
                {{"result", 1, "tensorflow.serving.ClassificationResult"},
                 {"model_spec", 2, "tensorflow.serving.ModelSpec"}});
  ExpectMessage(tfs::Regression::descriptor(), "tensorflow.serving.Regression", {{"value", 1}});
  ExpectMessage(tfs::RegressionResult::descriptor(), "tensorflow.serving.RegressionResult",
                {{"regressions", 1, "tensorflow.serving.Regression"}});
  ExpectMessage(tfs::RegressionRequest::descriptor(), "tensorflow.serving.RegressionRequest",
                {{"model_spec", 1, "tensorflow.serving.ModelSpec"},
                 {"input", 2, "tensorflow.serving.Input"}});
  ExpectMessage(tfs::RegressionResponse::descriptor(), "tensorflow.serving.RegressionResponse",
                {{"result", 1, "tensorflow.serving.RegressionResult"},
                 {"model_spec", 2, "tensorflow.serving.ModelSpec"}});
  ExpectMessage(tfs::Input::descriptor(), "tensorflow.serving.Input",
                {{"example_list", 1, "tensorflow.serving.ExampleList", "kind"},
                 {"example_list_with_context", 2, "tensorflow.serving.ExampleListWithContext", "kind"}});
  ExpectMessage(tfs::ExampleList::descriptor(), "tensorflow.serving.ExampleList",
                {{"examples", 1, "tensorflow.Example"}});
  ExpectMessage(tfs::ExampleListWithContext::descriptor(), "tensorflow.serving.ExampleListWithContext",
                {{"examples", 1, "tensorflow.Example"}, {"context", 2, "tensorflow.Example"}});
}

TEST(ProtoSchemaTest, MultiInference) {
  ExpectMessage(tfs::InferenceTask::descriptor(), "tensorflow.serving.InferenceTask",
                {{"model_spec", 1, "tensorflow.serving.ModelSpec"}, {"method_name", 2}});
  ExpectMessage(tfs::InferenceResult::descriptor(), "tensorflow.serving.InferenceResult",
                {{"model_spec", 1, "tensorflow.serving.ModelSpec"},
                 {"classification_result", 2, "tensorflow.serving.ClassificationResult", "result"},
                 {"regression_result", 3, "tensorflow.serving.RegressionResult", "result"}});
  ExpectMessage(tfs::MultiInferenceRequest::descriptor(), "tensorflow.serving.MultiInferenceRequest",
                {{"tasks", 1, "tensorflow.serving.InferenceTask"},
                 {"input", 2, "tensorflow.serving.Input"}});
  ExpectMessage(tfs::MultiInferenceResponse::descriptor(), "tensorflow.serving.MultiInferenceResponse",
                {{"results", 1, "tensorflow.serving.InferenceResult"}});
}

TEST(ProtoSchemaTest, MetadataAndStatus) {
  ExpectMessage(tfs::GetModelMetadataRequest::descriptor(), "tensorflow.serving.GetModelMetadataRequest",
                {{"model_spec", 1, "tensorflow.serving.ModelSpec"}, {"metadata_field", 2}});
  ExpectMessage(tfs::GetModelMetadataResponse::descriptor(), "tensorflow.serving.GetModelMetadataResponse",
                {{"model_spec", 1, "tensorflow.serving.ModelSpec"},
                 {"metadata", 2, "google.protobuf.Any"}});
  ExpectMessage(tfs::SignatureDefMap::descriptor(), "tensorflow.serving.SignatureDefMap",
                {{"signature_def", 1, "tensorflow.SignatureDef"}});
  ExpectMessage(tfs::GetModelStatusRequest::descriptor(), "tensorflow.serving.GetModelStatusRequest",
                {{"model_spec", 1, "tensorflow.serving.ModelSpec"}});
  ExpectMessage(tfs::GetModelStatusResponse::descriptor(), "tensorflow.serving.GetModelStatusResponse",
                {{"model_version_status", 1, "tensorflow.serving.ModelVersionStatus"}});
  ExpectMessage(tfs::ModelVersionStatus::descriptor(), "tensorflow.serving.ModelVersionStatus",
                {{"version", 1}, {"state", 2}, {"status", 3, "tensorflow.serving.StatusProto"}});
  EXPECT_EQ(tfs::ModelVersionStatus::UNKNOWN, 0);
  EXPECT_EQ(tfs::ModelVersionStatus::START, 10);
  EXPECT_EQ(tfs::ModelVersionStatus::LOADING, 20);
  EXPECT_EQ(tfs::ModelVersionStatus::AVAILABLE, 30);
  EXPECT_EQ(tfs::ModelVersionStatus::UNLOADING, 40);
  EXPECT_EQ(tfs::ModelVersionStatus::END, 50);
  EXPECT_EQ(tfs::ModelVersionStatus::State_descriptor()->full_name(),
            "tensorflow.serving.ModelVersionStatus.State");
  ExpectMessage(tfs::StatusProto::descriptor(), "tensorflow.serving.StatusProto",
                {{"error_code", 1}, {"error_message", 2}});
  EXPECT_EQ(tfs::StatusProto::descriptor()->FindFieldByName("error_code")->enum_type()->full_name(),
            "tensorflow.error.Code");
  // REST prints these with the proto's own names (docs: model status JSON).
  EXPECT_EQ(tfs::StatusProto::descriptor()->FindFieldByName("error_code")->json_name(), "error_code");
  EXPECT_EQ(tfs::StatusProto::descriptor()->FindFieldByName("error_message")->json_name(), "error_message");
  EXPECT_EQ(tfs::GetModelStatusResponse::descriptor()->FindFieldByName("model_version_status")->json_name(),
            "model_version_status");
  ExpectMessage(tfs::ReloadConfigRequest::descriptor(), "tensorflow.serving.ReloadConfigRequest",
                {{"config", 1, "tensorflow.serving.ModelServerConfig"}});
  ExpectMessage(tfs::ReloadConfigResponse::descriptor(), "tensorflow.serving.ReloadConfigResponse",
                {{"status", 1, "tensorflow.serving.StatusProto"}});
}

TEST(ProtoSchemaTest, ErrorCodes) {
  const gp::EnumDescriptor* e = tf::error::Code_descriptor();
  EXPECT_EQ(e->full_name(), "tensorflow.error.Code");
  const std::vector<std::pair<const char*, int>> codes = {
      {"OK", 0},  {"CANCELLED", 1}, {"UNKNOWN", 2}, {"INVALID_ARGUMENT", 3}, {"DEADLINE_EXCEEDED", 4},
      {"NOT_FOUND", 5}, {"ALREADY_EXISTS", 6}, {"PERMISSION_DENIED", 7}, {"RESOURCE_EXHAUSTED", 8},
      {"FAILED_PRECONDITION", 9}, {"ABORTED", 10}, {"OUT_OF_RANGE", 11}, {"UNIMPLEMENTED", 12},
      {"INTERNAL", 13}, {"UNAVAILABLE", 14}, {"DATA_LOSS", 15}, {"UNAUTHENTICATED", 16}};
  for (const auto& [name, number] : codes) {
    const gp::EnumValueDescriptor* v = e->FindValueByName(name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->number(), number) << name;
  }
}

TEST(ProtoSchemaTest, TensorProtoAndShape) {
  ExpectMessage(tf::TensorProto::descriptor(), "tensorflow.TensorProto",
                {{"dtype", 1},
                 {"tensor_shape", 2, "tensorflow.TensorShapeProto"},
                 {"version_number", 3},
                 {"tensor_content", 4},
                 {"float_val", 5},
                 {"double_val", 6},
                 {"int_val", 7},
                 {"string_val", 8},
                 {"scomplex_val", 9},
                 {"int64_val", 10},
                 {"bool_val", 11},
                 {"dcomplex_val", 12},
                 {"half_val", 13},
                 {"resource_handle_val", 14, "tensorflow.ResourceHandleProto"},
                 {"variant_val", 15, "tensorflow.VariantTensorDataProto"},
                 {"uint32_val", 16},
                 {"uint64_val", 17}});
  const gp::Descriptor* t = tf::TensorProto::descriptor();
  EXPECT_EQ(t->FindFieldByName("half_val")->type(), gp::FieldDescriptor::TYPE_INT32);
  EXPECT_EQ(t->FindFieldByName("string_val")->type(), gp::FieldDescriptor::TYPE_BYTES);
  EXPECT_EQ(t->FindFieldByName("dtype")->enum_type()->full_name(), "tensorflow.DataType");
  for (const char* packed : {"float_val", "double_val", "int_val", "int64_val", "bool_val", "half_val",
                             "scomplex_val", "dcomplex_val", "uint32_val", "uint64_val"}) {
    EXPECT_TRUE(t->FindFieldByName(packed)->is_packed()) << packed;
  }
  ExpectMessage(tf::TensorShapeProto::descriptor(), "tensorflow.TensorShapeProto",
                {{"dim", 2, "tensorflow.TensorShapeProto.Dim"}, {"unknown_rank", 3}});
  ExpectMessage(tf::TensorShapeProto::Dim::descriptor(), "tensorflow.TensorShapeProto.Dim",
                {{"size", 1}, {"name", 2}});
  ExpectMessage(tf::VariantTensorDataProto::descriptor(), "tensorflow.VariantTensorDataProto",
                {{"type_name", 1}, {"metadata", 2}, {"tensors", 3, "tensorflow.TensorProto"}});
}

// Golden bytes: what TensorFlow's own encoder produces for a bfloat16 1.0 (0x3f80) in half_val,
// packed: dtype (field 1, varint 14), then field 13 as a length-delimited run.
TEST(ProtoSchemaTest, HalfValWireBytes) {
  tf::TensorProto p;
  p.set_dtype(tf::DT_BFLOAT16);
  p.add_half_val(0x3f80);
  EXPECT_EQ(p.SerializeAsString(), std::string("\x08\x0e\x6a\x02\x80\x7f", 6));
}

TEST(ProtoSchemaTest, DataTypeValues) {
  const std::vector<std::pair<const char*, int>> types = {
      {"DT_INVALID", 0}, {"DT_FLOAT", 1}, {"DT_DOUBLE", 2}, {"DT_INT32", 3}, {"DT_UINT8", 4},
      {"DT_INT16", 5}, {"DT_INT8", 6}, {"DT_STRING", 7}, {"DT_COMPLEX64", 8}, {"DT_INT64", 9},
      {"DT_BOOL", 10}, {"DT_QINT8", 11}, {"DT_QUINT8", 12}, {"DT_QINT32", 13}, {"DT_BFLOAT16", 14},
      {"DT_QINT16", 15}, {"DT_QUINT16", 16}, {"DT_UINT16", 17}, {"DT_COMPLEX128", 18}, {"DT_HALF", 19},
      {"DT_RESOURCE", 20}, {"DT_VARIANT", 21}, {"DT_UINT32", 22}, {"DT_UINT64", 23},
      {"DT_FLOAT8_E5M2", 24}, {"DT_FLOAT8_E4M3FN", 25}, {"DT_INT4", 29}, {"DT_UINT4", 30}};
  const gp::EnumDescriptor* e = tf::DataType_descriptor();
  EXPECT_EQ(e->full_name(), "tensorflow.DataType");
  for (const auto& [name, number] : types) {
    const gp::EnumValueDescriptor* v = e->FindValueByName(name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->number(), number) << name;
    if (number == 0) continue;
    const gp::EnumValueDescriptor* ref = e->FindValueByName(std::string(name) + "_REF");
    ASSERT_NE(ref, nullptr) << name << "_REF";
    EXPECT_EQ(ref->number(), number + 100) << name << "_REF";
  }
  // Nothing beyond the listed values and their _REF twins.
  EXPECT_EQ(e->value_count(), static_cast<int>(types.size() * 2 - 1));
}

TEST(ProtoSchemaTest, ExampleAndFeatures) {
  ExpectMessage(tf::BytesList::descriptor(), "tensorflow.BytesList", {{"value", 1}});
  ExpectMessage(tf::FloatList::descriptor(), "tensorflow.FloatList", {{"value", 1}});
  ExpectMessage(tf::Int64List::descriptor(), "tensorflow.Int64List", {{"value", 1}});
  EXPECT_TRUE(tf::FloatList::descriptor()->FindFieldByName("value")->is_packed());
  EXPECT_TRUE(tf::Int64List::descriptor()->FindFieldByName("value")->is_packed());
  ExpectMessage(tf::Feature::descriptor(), "tensorflow.Feature",
                {{"bytes_list", 1, "tensorflow.BytesList", "kind"},
                 {"float_list", 2, "tensorflow.FloatList", "kind"},
                 {"int64_list", 3, "tensorflow.Int64List", "kind"}});
  ExpectMessage(tf::Features::descriptor(), "tensorflow.Features", {{"feature", 1, "tensorflow.Feature"}});
  ExpectMessage(tf::FeatureList::descriptor(), "tensorflow.FeatureList", {{"feature", 1, "tensorflow.Feature"}});
  ExpectMessage(tf::FeatureLists::descriptor(), "tensorflow.FeatureLists",
                {{"feature_list", 1, "tensorflow.FeatureList"}});
  ExpectMessage(tf::Example::descriptor(), "tensorflow.Example", {{"features", 1, "tensorflow.Features"}});
  ExpectMessage(tf::SequenceExample::descriptor(), "tensorflow.SequenceExample",
                {{"context", 1, "tensorflow.Features"}, {"feature_lists", 2, "tensorflow.FeatureLists"}});
}

TEST(ProtoSchemaTest, SignatureDef) {
  ExpectMessage(tf::TensorInfo::descriptor(), "tensorflow.TensorInfo",
                {{"name", 1, "", "encoding"},
                 {"dtype", 2},
                 {"tensor_shape", 3, "tensorflow.TensorShapeProto"},
                 {"coo_sparse", 4, "tensorflow.TensorInfo.CooSparse", "encoding"}});
  ExpectMessage(tf::SignatureDef::descriptor(), "tensorflow.SignatureDef",
                {{"inputs", 1, "tensorflow.TensorInfo"},
                 {"outputs", 2, "tensorflow.TensorInfo"},
                 {"method_name", 3},
                 {"defaults", 4, "tensorflow.TensorProto"}});
}

TEST(ProtoSchemaTest, MonitoringConfig) {
  ExpectMessage(tfs::MonitoringConfig::descriptor(), "tensorflow.serving.MonitoringConfig",
                {{"prometheus_config", 1, "tensorflow.serving.PrometheusConfig"}});
  ExpectMessage(tfs::PrometheusConfig::descriptor(), "tensorflow.serving.PrometheusConfig",
                {{"enable", 1}, {"path", 2}});
}

TEST(ProtoSchemaTest, ModelServerConfig) {
  ExpectMessage(tfs::ModelServerConfig::descriptor(), "tensorflow.serving.ModelServerConfig",
                {{"model_config_list", 1, "tensorflow.serving.ModelConfigList", "config"},
                 {"custom_model_config", 2, "google.protobuf.Any", "config"}});
  ExpectMessage(tfs::ModelConfigList::descriptor(), "tensorflow.serving.ModelConfigList",
                {{"config", 1, "tensorflow.serving.ModelConfig"}});
  ExpectMessage(tfs::ModelConfig::descriptor(), "tensorflow.serving.ModelConfig",
                {{"name", 1},
                 {"base_path", 2},
                 {"model_type", 3},
                 {"model_platform", 4},
                 {"logging_config", 6, "tensorflow.serving.LoggingConfig"},
                 {"model_version_policy", 7,
                  "tensorflow.serving.FileSystemStoragePathSourceConfig.ServableVersionPolicy"},
                 {"version_labels", 8},
                 // Lockstep's own, far from upstream's numbers (server/README.md).
                 {"traffic_split", 1001, "lockstep.config.TrafficSplit"},
                 {"batching_parameters", 1002, "tensorflow.serving.BatchingParameters"},
                 {"matmul_precision", 1003},
                 {"version_transition", 1004},
                 {"intra_op_parallelism", 1005}});
  ExpectMessage(tfs::BatchingParameters::descriptor(), "tensorflow.serving.BatchingParameters",
                {{"max_batch_size", 1, "google.protobuf.Int64Value"},
                 {"batch_timeout_micros", 2, "google.protobuf.Int64Value"},
                 {"max_enqueued_batches", 3, "google.protobuf.Int64Value"},
                 {"num_batch_threads", 4, "google.protobuf.Int64Value"},
                 {"thread_pool_name", 5, "google.protobuf.StringValue"},
                 {"allowed_batch_sizes", 6},
                 {"pad_variable_length_inputs", 7, "google.protobuf.BoolValue"}});
  ExpectMessage(lockstep::config::TrafficSplit::descriptor(), "lockstep.config.TrafficSplit",
                {{"arms", 1, "lockstep.config.TrafficSplit.Arm"}, {"shadow", 2, "lockstep.config.TrafficSplit.Shadow"}});
  ExpectMessage(lockstep::config::TrafficSplit::Shadow::descriptor(), "lockstep.config.TrafficSplit.Shadow",
                {{"label", 1, "", "target"}, {"version", 2, "", "target"}, {"percent", 3}});
  ExpectMessage(lockstep::config::TrafficSplit::Arm::descriptor(), "lockstep.config.TrafficSplit.Arm",
                {{"label", 1, "", "target"}, {"version", 2, "", "target"}, {"weight", 3}});
  ExpectMessage(tfs::LoggingConfig::descriptor(), "tensorflow.serving.LoggingConfig",
                {{"log_collector_config", 1, "tensorflow.serving.LogCollectorConfig"},
                 {"sampling_config", 2, "tensorflow.serving.SamplingConfig"}});
  ExpectMessage(tfs::LogCollectorConfig::descriptor(), "tensorflow.serving.LogCollectorConfig",
                {{"type", 1}, {"filename_prefix", 2}});
  ExpectMessage(tfs::SamplingConfig::descriptor(), "tensorflow.serving.SamplingConfig",
                {{"sampling_rate", 1}, {"attributes", 2}});
  const gp::Descriptor* mc = tfs::ModelConfig::descriptor();
  EXPECT_TRUE(mc->IsReservedNumber(5));
  EXPECT_TRUE(mc->IsReservedNumber(9));
  const gp::FieldDescriptor* labels = mc->FindFieldByName("version_labels");
  ASSERT_TRUE(labels->is_map());
  EXPECT_EQ(labels->message_type()->map_key()->type(), gp::FieldDescriptor::TYPE_STRING);
  EXPECT_EQ(labels->message_type()->map_value()->type(), gp::FieldDescriptor::TYPE_INT64);

  ExpectMessage(VersionPolicy::descriptor(),
                "tensorflow.serving.FileSystemStoragePathSourceConfig.ServableVersionPolicy",
                {{"latest", 100, "tensorflow.serving.FileSystemStoragePathSourceConfig.ServableVersionPolicy.Latest",
                  "policy_choice"},
                 {"all", 101, "tensorflow.serving.FileSystemStoragePathSourceConfig.ServableVersionPolicy.All",
                  "policy_choice"},
                 {"specific", 102,
                  "tensorflow.serving.FileSystemStoragePathSourceConfig.ServableVersionPolicy.Specific",
                  "policy_choice"}});
  ExpectMessage(VersionPolicy::Latest::descriptor(),
                "tensorflow.serving.FileSystemStoragePathSourceConfig.ServableVersionPolicy.Latest",
                {{"num_versions", 1}});
  EXPECT_EQ(VersionPolicy::Latest::descriptor()->field(0)->type(), gp::FieldDescriptor::TYPE_UINT32);
  ExpectMessage(VersionPolicy::Specific::descriptor(),
                "tensorflow.serving.FileSystemStoragePathSourceConfig.ServableVersionPolicy.Specific",
                {{"versions", 1}});
  EXPECT_EQ(VersionPolicy::Specific::descriptor()->field(0)->type(), gp::FieldDescriptor::TYPE_INT64);
}

TEST(ProtoSchemaTest, Services) {
  // The generated gRPC stubs exist (this file would not compile otherwise).
  static_assert(sizeof(tfs::PredictionService::Service) > 0);
  static_assert(sizeof(tfs::ModelService::Service) > 0);
  ExpectService(tfs::PredictRequest::descriptor()->file()->pool()->FindServiceByName(
                    "tensorflow.serving.PredictionService"),
                "tensorflow.serving.PredictionService",
                {{"Classify", "tensorflow.serving.ClassificationRequest", "tensorflow.serving.ClassificationResponse"},
                 {"Regress", "tensorflow.serving.RegressionRequest", "tensorflow.serving.RegressionResponse"},
                 {"Predict", "tensorflow.serving.PredictRequest", "tensorflow.serving.PredictResponse"},
                 {"MultiInference", "tensorflow.serving.MultiInferenceRequest",
                  "tensorflow.serving.MultiInferenceResponse"},
                 {"GetModelMetadata", "tensorflow.serving.GetModelMetadataRequest",
                  "tensorflow.serving.GetModelMetadataResponse"}});
  ExpectService(tfs::GetModelStatusRequest::descriptor()->file()->pool()->FindServiceByName(
                    "tensorflow.serving.ModelService"),
                "tensorflow.serving.ModelService",
                {{"GetModelStatus", "tensorflow.serving.GetModelStatusRequest",
                  "tensorflow.serving.GetModelStatusResponse"},
                 {"HandleReloadConfigRequest", "tensorflow.serving.ReloadConfigRequest",
                  "tensorflow.serving.ReloadConfigResponse"}});
}

}  // namespace
