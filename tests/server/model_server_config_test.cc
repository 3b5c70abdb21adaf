// ModelServerConfig text -> StoreConfig: TF Serving's fields and defaults, and errors that
// name the file, the line and the field.
#include <gtest/gtest.h>

#include <filesystem>

#include "server/model_server_config.h"

namespace lockstep {
namespace {

TEST(ModelServerConfigTest, TranslatesEveryField) {
  StatusOr<tensorflow::serving::ModelServerConfig> proto = ParseModelServerConfig(R"pb(
    model_config_list {
      config { name: 'a' base_path: '/models/a' model_platform: 'tensorflow'
               model_version_policy { specific { versions: 42 versions: 43 } }
               version_labels { key: 'stable' value: 42 } version_labels { key: 'canary' value: 43 }
               traffic_split { arms { label: 'stable' weight: 90 } arms { label: 'canary' weight: 10 }
                               arms { version: 43 weight: 0 } shadow { version: 44 percent: 2.5 } } }
      config { name: 'b' base_path: '/models/b' model_version_policy { all {} }
               version_transition: 'resource_preserving' }
      config { name: 'c' base_path: '/models/c' model_platform: 'lockstep'
               model_version_policy { latest { num_versions: 3 } } }
      config { name: 'd' base_path: '/models/d' matmul_precision: 'bfloat16' intra_op_parallelism: 2 }
    })pb",
                                                                                    "models.config");
  ASSERT_TRUE(proto.ok()) << proto.status().ToString();
  StatusOr<StoreConfig> config = StoreConfigFromProto(*proto);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->models.size(), 4u);
  const ModelConfig& a = config->models[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.base_path, "/models/a");
  EXPECT_EQ(a.policy.kind, VersionPolicy::kSpecific);
  EXPECT_EQ(a.policy.versions, (std::vector<int64_t>{42, 43}));
  EXPECT_EQ(a.labels.at("stable"), 42);
  EXPECT_EQ(a.labels.at("canary"), 43);
  EXPECT_EQ(a.traffic, (std::vector<TrafficArm>{{"stable", 0, 90}, {"canary", 0, 10}, {"", 43, 0}}));
  EXPECT_TRUE(config->models[1].traffic.empty());
  EXPECT_EQ(a.transition, ModelConfig::Transition::kAvailabilityPreserving);
  EXPECT_EQ(config->models[1].transition, ModelConfig::Transition::kResourcePreserving);
  ASSERT_TRUE(a.shadow.has_value());
  EXPECT_EQ(*a.shadow, (ShadowTraffic{"", 44, 2.5}));
  EXPECT_FALSE(config->models[1].shadow.has_value());
  EXPECT_EQ(config->models[1].policy.kind, VersionPolicy::kAll);
  EXPECT_EQ(config->models[2].policy.kind, VersionPolicy::kLatest);
  EXPECT_EQ(config->models[2].policy.num_versions, 3u);
  EXPECT_EQ(config->models[3].policy.kind, VersionPolicy::kLatest);  // the default: latest 1
  EXPECT_EQ(config->models[3].policy.num_versions, 1u);
  EXPECT_EQ(config->models[3].platform, "tensorflow");
  EXPECT_TRUE(config->models[3].bf16_products);
  EXPECT_FALSE(a.bf16_products);
  EXPECT_EQ(config->models[3].intra_op_threads, 2);
  EXPECT_EQ(a.intra_op_threads, 0);  // the server's shared pool
}

TEST(ModelServerConfigTest, ParseErrorsNameFileLineAndColumn) {
  StatusOr<tensorflow::serving::ModelServerConfig> proto =
      ParseModelServerConfig("model_config_list {\n  config { nmae: 'a' }\n}\n", "/etc/models.config");
  ASSERT_FALSE(proto.ok());
  EXPECT_EQ(proto.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(proto.status().message().find("/etc/models.config:2:"), std::string::npos) << proto.status().message();
  EXPECT_NE(proto.status().message().find("nmae"), std::string::npos) << proto.status().message();
  EXPECT_FALSE(ParseModelServerConfig("garbage", "f").ok());
}

TEST(ModelServerConfigTest, RefusesImpossibleConfigs) {
  auto error = [](const std::string& text) {
    StatusOr<tensorflow::serving::ModelServerConfig> proto = ParseModelServerConfig(text, "f");
    EXPECT_TRUE(proto.ok()) << proto.status().ToString();
    return StoreConfigFromProto(*proto).status();
  };
  EXPECT_NE(error("model_config_list { config { name: 'a' base_path: '/m' model_platform: 'pytorch' } }")
                .message()
                .find("model_platform 'pytorch'"),
            std::string::npos);
  EXPECT_NE(error("model_config_list { config { name: 'a' base_path: 'relative/m' } }").message().find("absolute"),
            std::string::npos);
  EXPECT_NE(error("model_config_list { config { name: '../a' base_path: '/m' } }").message().find("name"),
            std::string::npos);
  EXPECT_NE(error("model_config_list { config { name: 'a' base_path: '/m' } config { name: 'a' base_path: '/n' } }")
                .message()
                .find("more than once"),
            std::string::npos);
  EXPECT_EQ(error("custom_model_config { }").code(), StatusCode::kUnimplemented);
  EXPECT_EQ(error("model_config_list { config { name: 'a' base_path: '/m' traffic_split { arms { weight: 1 } } } }")
                .message(),
            "model 'a': traffic_split.arms[0] names no label and no positive version");
  EXPECT_NE(error("model_config_list { config { name: 'a' base_path: '/m' matmul_precision: 'float16' } }")
                .message()
                .find("(model 'a'): matmul_precision 'float16' is not float32 or bfloat16"),
            std::string::npos);
  EXPECT_EQ(error("model_config_list { config { name: 'a' base_path: '/m' intra_op_parallelism: -1 } }").message(),
            "model 'a': intra_op_parallelism -1 is not in [0, 1024]");
  EXPECT_EQ(error("model_config_list { config { name: 'a' base_path: '/m' intra_op_parallelism: 5000 } }").message(),
            "model 'a': intra_op_parallelism 5000 is not in [0, 1024]");
  EXPECT_NE(error("model_config_list { config { name: 'a' base_path: '/m' version_transition: 'eager' } }")
                .message()
                .find("(model 'a'): version_transition 'eager' is not availability_preserving or resource_preserving"),
            std::string::npos);
}

TEST(ModelServerConfigTest, SingleModelFromFlags) {
  StatusOr<StoreConfig> config = SingleModelConfig("half", "relative/half");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->models.size(), 1u);
  EXPECT_TRUE(std::filesystem::path(config->models[0].base_path).is_absolute());
  EXPECT_FALSE(SingleModelConfig("a/b", "/m").ok());
}

}  // namespace
}  // namespace lockstep
