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
TEST(FuzzCorpusTest, ModelConfig) {
  ReplayFuzzCorpus("model_config", fuzz::ModelConfig);
}
TEST(FuzzCorpusTest, BatchingParameters) {
  ReplayFuzzCorpus("batching_parameters", fuzz::BatchingParameters);
}

}  // namespace
}  // namespace lockstep::test
