// The runtime's fuzz target (tests/fuzz/) on its corpus: see tests/fuzz/corpus_replay.h.
#include "tests/fuzz/corpus_replay.h"

namespace lockstep::test {
namespace {

TEST(FuzzCorpusTest, BundleReader) {
  ReplayFuzzCorpus("bundle_reader", fuzz::BundleReader);
}

}  // namespace
}  // namespace lockstep::test
