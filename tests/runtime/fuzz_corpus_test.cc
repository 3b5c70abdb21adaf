// The runtime's fuzz targets (tests/fuzz/) on their corpora: see tests/fuzz/corpus_replay.h.
#include "tests/fuzz/corpus_replay.h"

namespace lockstep::test {
namespace {

TEST(FuzzCorpusTest, BundleReader) {
  ReplayFuzzCorpus("bundle_reader", fuzz::BundleReader);
}

TEST(FuzzCorpusTest, SavedModel) {
  ReplayFuzzCorpus("saved_model", fuzz::SavedModel);
}

TEST(FuzzCorpusTest, OnnxModel) {
  ReplayFuzzCorpus("onnx_model", fuzz::OnnxModel);
}

}  // namespace
}  // namespace lockstep::test
