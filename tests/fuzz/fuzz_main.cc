// libFuzzer's entry point for one target, chosen at build time (tests/fuzz/CMakeLists.txt).
#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include "tests/fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Readers log what they refuse; at millions of inputs that is all the fuzzer would print.
  spdlog::set_level(spdlog::level::off);
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  LOCKSTEP_FUZZ_FUNCTION(lockstep::fuzz::Bytes(data, size));
  return 0;
}
