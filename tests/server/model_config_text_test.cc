// --model_config_file is text format: configs written for TensorFlow Serving must parse with our
// messages unchanged (docs/tf-serving-api.md section 3), and malformed ones must fail.
#include <gtest/gtest.h>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <string>
#include <vector>

#include "tensorflow_serving/config/model_server_config.pb.h"

namespace {

namespace tfs = tensorflow::serving;
using VersionPolicy = tfs::FileSystemStoragePathSourceConfig::ServableVersionPolicy;

// Keeps parse errors for the assertions instead of logging them.
class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    errors.push_back(std::to_string(line) + ":" + std::to_string(column) + ": " + message);
  }
  std::vector<std::string> errors;
};

bool Parse(const std::string& text, tfs::ModelServerConfig* config, std::vector<std::string>* errors) {
  google::protobuf::TextFormat::Parser parser;
  CollectErrors collector;
  parser.RecordErrorsTo(&collector);
  const bool ok = parser.ParseFromString(text, config);
  *errors = collector.errors;
  return ok;
}

// The example from the documentation, verbatim: several fields on one line, single quotes and
// a trailing comment.
constexpr const char* kDocExample = R"pb(
model_config_list {
  config {
    name: 'm'  base_path: '/models/m'  model_platform: 'tensorflow'
    model_version_policy { specific { versions: 42 versions: 43 } }   # or latest { num_versions: N } / all {}
    version_labels { key: 'stable' value: 42 }
    version_labels { key: 'canary' value: 43 }
  }
}
)pb";

TEST(ModelConfigTextTest, ParsesTheDocumentedExample) {
  tfs::ModelServerConfig config;
  std::vector<std::string> errors;
  ASSERT_TRUE(Parse(kDocExample, &config, &errors)) << (errors.empty() ? "" : errors[0]);
  ASSERT_TRUE(config.has_model_config_list());
  ASSERT_EQ(config.model_config_list().config_size(), 1);
  const tfs::ModelConfig& m = config.model_config_list().config(0);
  EXPECT_EQ(m.name(), "m");
  EXPECT_EQ(m.base_path(), "/models/m");
  EXPECT_EQ(m.model_platform(), "tensorflow");
  ASSERT_EQ(m.model_version_policy().policy_choice_case(), VersionPolicy::kSpecific);
  ASSERT_EQ(m.model_version_policy().specific().versions_size(), 2);
  EXPECT_EQ(m.model_version_policy().specific().versions(0), 42);
  EXPECT_EQ(m.model_version_policy().specific().versions(1), 43);
  ASSERT_EQ(m.version_labels_size(), 2);
  EXPECT_EQ(m.version_labels().at("stable"), 42);
  EXPECT_EQ(m.version_labels().at("canary"), 43);
}

TEST(ModelConfigTextTest, ParsesLatestAndAllPolicies) {
  tfs::ModelServerConfig config;
  std::vector<std::string> errors;
  ASSERT_TRUE(Parse(R"pb(
    model_config_list {
      config { name: "a" base_path: "/models/a" model_version_policy { latest { num_versions: 2 } } }
      config { name: "b" base_path: "/models/b" model_version_policy { all {} } }
      config { name: "c" base_path: "/models/c" }
    }
  )pb", &config, &errors)) << (errors.empty() ? "" : errors[0]);
  ASSERT_EQ(config.model_config_list().config_size(), 3);
  const auto& a = config.model_config_list().config(0).model_version_policy();
  ASSERT_EQ(a.policy_choice_case(), VersionPolicy::kLatest);
  EXPECT_EQ(a.latest().num_versions(), 2u);
  EXPECT_EQ(config.model_config_list().config(1).model_version_policy().policy_choice_case(),
            VersionPolicy::kAll);
  // No policy: the reader applies the default (latest, one version).
  EXPECT_EQ(config.model_config_list().config(2).model_version_policy().policy_choice_case(),
            VersionPolicy::POLICY_CHOICE_NOT_SET);
}

// A TensorFlow Serving config that turns on request logging must still parse.
TEST(ModelConfigTextTest, ParsesLoggingConfig) {
  tfs::ModelServerConfig config;
  std::vector<std::string> errors;
  ASSERT_TRUE(Parse(R"pb(
    model_config_list {
      config {
        name: "m" base_path: "/models/m"
        logging_config {
          log_collector_config { type: "file" filename_prefix: "/tmp/log" }
          sampling_config { sampling_rate: 0.25 }
        }
      }
    }
  )pb", &config, &errors)) << (errors.empty() ? "" : errors[0]);
  const auto& logging = config.model_config_list().config(0).logging_config();
  EXPECT_EQ(logging.log_collector_config().type(), "file");
  EXPECT_EQ(logging.log_collector_config().filename_prefix(), "/tmp/log");
  EXPECT_DOUBLE_EQ(logging.sampling_config().sampling_rate(), 0.25);
}

TEST(ModelConfigTextTest, RoundTripsThroughBinary) {
  tfs::ModelServerConfig config;
  std::vector<std::string> errors;
  ASSERT_TRUE(Parse(kDocExample, &config, &errors));
  tfs::ModelServerConfig again;
  ASSERT_TRUE(again.ParseFromString(config.SerializeAsString()));
  EXPECT_EQ(again.model_config_list().config(0).version_labels().at("canary"), 43);
}

TEST(ModelConfigTextTest, RejectsMalformedConfigs) {
  const std::vector<std::string> bad = {
      // Unbalanced braces.
      "model_config_list { config { name: 'm' }",
      // A field upstream does not have.
      "model_config_list { config { name: 'm' base_dir: '/x' } }",
      // num_versions is unsigned.
      "model_config_list { config { model_version_policy { latest { num_versions: -1 } } } }",
      // A version is a number.
      "model_config_list { config { model_version_policy { specific { versions: 'one' } } } }",
      // Label values are versions (int64), not names.
      "model_config_list { config { version_labels { key: 'stable' value: 'v1' } } }",
      // Two members of the policy oneof.
      "model_config_list { config { model_version_policy { latest {} all {} } } }",
      // An enum value ModelType does not have.
      "model_config_list { config { model_type: BOGUS } }",
  };
  for (const std::string& text : bad) {
    tfs::ModelServerConfig config;
    std::vector<std::string> errors;
    EXPECT_FALSE(Parse(text, &config, &errors)) << text;
    EXPECT_FALSE(errors.empty()) << text;
  }
}

}  // namespace
