// model-train's fuzz targets (tests/fuzz/) on their corpora: see tests/fuzz/corpus_replay.h.
#include "tests/fuzz/corpus_replay.h"

namespace lockstep::test {
namespace {

TEST(FuzzCorpusTest, TfRecordExample) {
  ReplayFuzzCorpus("tfrecord_example", fuzz::TfRecordExample);
}
TEST(FuzzCorpusTest, Csv) {
  ReplayFuzzCorpus("csv", fuzz::Csv);
}

}  // namespace
}  // namespace lockstep::test
