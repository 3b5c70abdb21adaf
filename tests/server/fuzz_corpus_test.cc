// The server's fuzz targets (tests/fuzz/) on their corpora: see tests/fuzz/corpus_replay.h.
#include "tests/fuzz/corpus_replay.h"

namespace lockstep::test {
namespace {

TEST(FuzzCorpusTest, RestRequest) {
  ReplayFuzzCorpus("rest_request", fuzz::RestRequest);
}
TEST(FuzzCorpusTest, TensorProto) {
  ReplayFuzzCorpus("tensor_proto", fuzz::TensorProto);
}
TEST(FuzzCorpusTest, V2InferJson) {
  ReplayFuzzCorpus("v2_infer_json", fuzz::V2InferJson);
}
TEST(FuzzCorpusTest, V2InferBinary) {
  ReplayFuzzCorpus("v2_infer_binary", fuzz::V2InferBinary);
}
TEST(FuzzCorpusTest, V2InferGrpc) {
  ReplayFuzzCorpus("v2_infer_grpc", fuzz::V2InferGrpc);
}
TEST(FuzzCorpusTest, ModelConfig) {
  ReplayFuzzCorpus("model_config", fuzz::ModelConfig);
}
TEST(FuzzCorpusTest, BatchingParameters) {
  ReplayFuzzCorpus("batching_parameters", fuzz::BatchingParameters);
}

}  // namespace
}  // namespace lockstep::test
