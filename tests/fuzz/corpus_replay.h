// Replays a fuzz target's corpus (tests/fuzz/corpus/<target>/: the seeds, and every input a
// fuzzer crashed on once it was fixed) in the ordinary test suite, so that each build and
// sanitizer variant runs them and a fixed crash stays fixed.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/common/file_util.h"
#include "tests/fuzz/fuzz_targets.h"

namespace lockstep::test {

inline void ReplayFuzzCorpus(const std::string& target, void (*function)(fuzz::Bytes)) {
  const std::filesystem::path dir = std::filesystem::path(LOCKSTEP_SOURCE_DIR) / "tests/fuzz/corpus" / target;
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  std::vector<std::filesystem::path> inputs;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) inputs.push_back(entry.path());
  std::sort(inputs.begin(), inputs.end());
  EXPECT_FALSE(inputs.empty()) << dir << " has no seeds";
  for (const std::filesystem::path& input : inputs) {
    SCOPED_TRACE(input.string());
    const std::string bytes = ReadFile(input);
    function(fuzz::Bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  }
}

}  // namespace lockstep::test
