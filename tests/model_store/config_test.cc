#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model_store/model_config.h"

namespace lockstep {
namespace {

ModelConfig ConfigOf(std::string name, std::string base = "/models/m") {
  ModelConfig m;
  m.name = std::move(name);
  m.base_path = std::move(base);
  return m;
}

void ExpectInvalid(const StoreConfig& config, const std::string& fragment) {
  const Status s = ValidateStoreConfig(config);
  ASSERT_FALSE(s.ok()) << "expected an error mentioning " << fragment;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s.ToString();
}

TEST(ValidateStoreConfig, AcceptsGoodConfigs) {
  EXPECT_TRUE(ValidateStoreConfig({}).ok());
  StoreConfig c;
  c.models.push_back(ConfigOf("half_plus_two"));
  c.models.push_back(ConfigOf("m-2.v1", "/models/../models/other/"));
  c.models[1].policy.kind = VersionPolicy::kSpecific;
  c.models[1].policy.versions = {1, 42};
  c.models[1].labels = {{"stable", 1}, {"canary", 42}};
  const Status s = ValidateStoreConfig(c);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(ValidateStoreConfig, RejectsUnsafeOrDuplicateNames) {
  for (const std::string& bad : std::vector<std::string>{"", "a/b", "..", "a..b", ".", "x\\y", std::string("a\nb"), std::string("a\0b", 3),
                                std::string(256, 'n')}) {
    StoreConfig c;
    c.models.push_back(ConfigOf(bad));
    ExpectInvalid(c, "name");
  }
  StoreConfig dup;
  dup.models.push_back(ConfigOf("m"));
  dup.models.push_back(ConfigOf("m", "/other"));
  ExpectInvalid(dup, "more than once");
}

TEST(ValidateStoreConfig, RejectsRelativeOrEmptyBasePath) {
  StoreConfig c;
  c.models.push_back(ConfigOf("m", ""));
  ExpectInvalid(c, "model 'm': base_path is empty");
  c.models[0].base_path = "models/m";
  ExpectInvalid(c, "not an absolute path");
}

TEST(ValidateStoreConfig, RejectsBadPolicies) {
  StoreConfig c;
  c.models.push_back(ConfigOf("m"));
  c.models[0].policy.num_versions = 0;
  ExpectInvalid(c, "num_versions");
  c.models[0].policy = {VersionPolicy::kSpecific, 1, {}};
  ExpectInvalid(c, "specific.versions is empty");
  c.models[0].policy.versions = {3, 0};
  ExpectInvalid(c, "specific.versions has 0");
  c.models[0].policy.versions = {-1};
  ExpectInvalid(c, "specific.versions has -1");
  c.models[0].policy = {VersionPolicy::kAll, 0, {}};  // num_versions means nothing for "all"
  EXPECT_TRUE(ValidateStoreConfig(c).ok());
}

TEST(ValidateStoreConfig, RejectsBadLabels) {
  StoreConfig c;
  c.models.push_back(ConfigOf("m"));
  c.models[0].labels = {{"", 1}};
  ExpectInvalid(c, "model 'm': version_labels has an empty label");
  c.models[0].labels = {{"stable", 0}};
  ExpectInvalid(c, "version_labels['stable'] is 0");
}

TEST(ValidateStoreConfig, ChecksTrafficArms) {
  StoreConfig c;
  c.models.push_back(ConfigOf("m"));
  ModelConfig& m = c.models[0];
  m.labels = {{"stable", 1}, {"canary", 2}};
  m.traffic = {{"stable", 0, 90}, {"canary", 0, 10}, {"", 3, 0}};
  EXPECT_TRUE(ValidateStoreConfig(c).ok()) << ValidateStoreConfig(c).ToString();
  EXPECT_EQ(m.traffic[0].Name(), "label:stable");
  EXPECT_EQ(m.traffic[2].Name(), "version:3");

  m.traffic = {{"stable", 0, 90}, {"", 0, 10}};
  ExpectInvalid(c, "model 'm': traffic_split.arms[1] names no label and no positive version");
  m.traffic = {{"stable", 0, 90}, {"blue", 0, 10}};
  ExpectInvalid(c, "traffic_split.arms[1]: label 'blue' is not one of the model's version_labels");
  m.traffic = {{"", 2, 90}, {"", 2, 10}};
  ExpectInvalid(c, "traffic_split.arms[1]: version:2 appears more than once");
  m.traffic = {{"stable", 0, 0}, {"canary", 0, 0}};
  ExpectInvalid(c, "traffic_split: every arm has weight 0");

  m.traffic.clear();
  m.shadow = ShadowTraffic{"canary", 0, 5};
  EXPECT_TRUE(ValidateStoreConfig(c).ok()) << ValidateStoreConfig(c).ToString();
  m.shadow = ShadowTraffic{"", 0, 5};
  ExpectInvalid(c, "traffic_split.shadow names no label and no positive version");
  m.shadow = ShadowTraffic{"blue", 0, 5};
  ExpectInvalid(c, "traffic_split.shadow: label 'blue' is not one of the model's version_labels");
  m.shadow = ShadowTraffic{"", 4, 0};
  ExpectInvalid(c, "traffic_split.shadow.percent must be in (0, 100], got 0");
  m.shadow = ShadowTraffic{"", 4, 101};
  ExpectInvalid(c, "traffic_split.shadow.percent must be in (0, 100]");
}

}  // namespace
}  // namespace lockstep
