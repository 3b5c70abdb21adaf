#include <gtest/gtest.h>

#include "model_store/loader.h"
#include "tests/model_store/store_test_util.h"

namespace lockstep {
namespace {

using store_test::RunOnce;
using store_test::ScratchDir;
using store_test::WriteVersion;

TEST(LoadVersion, LoadsAndServes) {
  ScratchDir dir;
  WriteVersion(dir.path(), 3);
  const auto before = std::chrono::system_clock::now();
  StatusOr<std::shared_ptr<const LoadedVersion>> loaded = LoadVersion("m", 3, dir / "3", {});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ((*loaded)->model(), "m");
  EXPECT_EQ((*loaded)->version(), 3);
  EXPECT_GE((*loaded)->loaded_at(), before);
  StatusOr<float> y = RunOnce(**loaded);
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(*y, 3.0f);
}

TEST(LoadVersion, ErrorsNameModelAndVersion) {
  ScratchDir dir;
  StatusOr<std::shared_ptr<const LoadedVersion>> missing = LoadVersion("m", 4, dir / "4", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("model 'm' version 4"), std::string::npos)
      << missing.status().ToString();

  WriteVersion(dir.path(), 2);
  store_test::FlipByte(dir / "2" / std::string(kBundleWeightsFile), 0);
  StatusOr<std::shared_ptr<const LoadedVersion>> corrupt = LoadVersion("m", 2, dir / "2", {});
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.status().message().find("weights.bin"), std::string::npos) << corrupt.status().ToString();
}

TEST(LoadVersion, RunsWarmupRequests) {
  ScratchDir dir;
  WriteVersion(dir.path(), 1,
               {{std::string(kWarmupRequestsAsset),
                 R"([{"signature_name": "serving_default", "inputs": {"x": [1.0, 2.0]}},
                     {"inputs": {"x": [3.0]}}])"}});
  StatusOr<std::shared_ptr<const LoadedVersion>> loaded = LoadVersion("m", 1, dir / "1", {});
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
}

TEST(LoadVersion, FailingWarmupFailsTheLoad) {
  struct Case {
    std::string json;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {R"([{"inputs": {"x": [1.0]}}, {"inputs": {"x": [[1.0]]}}])", "warm-up request 1"},
      {R"([{"signature_name": "nope", "inputs": {"x": [1.0]}}])", "no signature 'nope'"},
      {R"([{"inputs": {"z": [1.0]}}])", "no input 'z'"},
      {R"([{"inputs": {"x": ["text"]}}])", "input 'x'"},
      {R"({"inputs": {}})", "must be a JSON array"},
      {R"([1])", "not a JSON object"},
      {R"([{"inputs": [1]}])", "'inputs'"},
      {"[", "warmup_requests.json"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    ScratchDir dir;
    WriteVersion(dir.path(), 1, {{std::string(kWarmupRequestsAsset), cases[i].json}});
    StatusOr<std::shared_ptr<const LoadedVersion>> loaded = LoadVersion("m", 1, dir / "1", {});
    ASSERT_FALSE(loaded.ok()) << cases[i].json;
    EXPECT_NE(loaded.status().message().find(cases[i].fragment), std::string::npos)
        << cases[i].json << " -> " << loaded.status().ToString();
    EXPECT_NE(loaded.status().message().find("model 'm' version 1"), std::string::npos);
  }
}

TEST(LoadVersion, AtMostAThousandWarmupRequests) {
  std::string json = "[";
  for (size_t i = 0; i <= kMaxWarmupRequests; ++i) json += std::string(i ? "," : "") + R"({"inputs": {"x": [1.0]}})";
  json += "]";
  ScratchDir dir;
  WriteVersion(dir.path(), 1, {{std::string(kWarmupRequestsAsset), json}});
  StatusOr<std::shared_ptr<const LoadedVersion>> loaded = LoadVersion("m", 1, dir / "1", {});
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("limit is 1000"), std::string::npos) << loaded.status().ToString();
}

}  // namespace
}  // namespace lockstep
