// model-server with an S3 model repository: base_path s3://bucket/prefix on s3rver (npm), the
// versions uploaded by boto3 as another tool would. A version is listed, downloaded into
// --model_cache_dir, checked and served; one whose upload is unfinished (no manifest yet) is
// never served and loads once the upload completes; a cached version is not downloaded again;
// a failed download is retried; and an S3 server down at start delays the model, not the server.
// model-cli publish and model-train --export_dir s3:// write versions there that it serves.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tests/common/run_command.h"
#include "tests/e2e/http_client.h"
#include "tests/e2e/server_harness.h"
#include "tests/model_store/s3_test_util.h"

namespace lockstep::e2e {
namespace {

// Every file of the bundle `version_dir` as objects under `prefix`, in sorted order, the
// manifest last unless `without_manifest` (then it is left out).
std::vector<std::pair<std::string, std::string>> BundleObjects(const fs::path& version_dir, const std::string& prefix,
                                                               bool without_manifest = false) {
  std::vector<std::pair<std::string, std::string>> objects;
  std::pair<std::string, std::string> manifest;
  for (const auto& e : fs::recursive_directory_iterator(version_dir)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), version_dir).string();
    std::pair<std::string, std::string> object{prefix + rel, e.path().string()};
    if (rel == "MANIFEST.sha256") {
      manifest = object;
    } else {
      objects.push_back(object);
    }
  }
  std::sort(objects.begin(), objects.end());
  if (!without_manifest) objects.push_back(manifest);
  return objects;
}

class S3RepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("S3_ENDPOINT", s3_.endpoint().c_str(), 1);
    setenv("S3_USE_HTTPS", "0", 1);
    setenv("AWS_ACCESS_KEY_ID", s3_test::kAccessKey, 1);
    setenv("AWS_SECRET_ACCESS_KEY", s3_test::kSecretKey, 1);
  }
  void TearDown() override {
    for (const char* name : {"S3_ENDPOINT", "S3_USE_HTTPS", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}) {
      unsetenv(name);
    }
  }
  std::vector<std::string> Flags() const {
    return {"--model_name=hp", "--model_base_path=s3://models/zoo/hp", "--model_cache_dir=" + (dir_ / "cache").string(),
            "--file_system_poll_wait_seconds=1"};
  }
  // What the server answers for x = 2, or the HTTP error.
  static std::string Answer(HttpClient& http) {
    const HttpResult r = http.Post("/v1/models/hp:predict", R"({"instances": [2.0]})");
    return r.status == 200 ? r.body : "HTTP " + std::to_string(r.status) + " " + r.body;
  }

  s3_test::S3rver s3_;
  ScratchDir dir_;
};

TEST_F(S3RepositoryTest, ServesVersionsUploadedToS3AndOnlyWholeOnes) {
  WriteHalfPlusTwo(dir_ / "local", 1);  // y = 0.5 x + 2
  s3_.Put(BundleObjects(dir_ / "local" / "1", "zoo/hp/1/"));
  auto server = std::make_unique<ServerProcess>(dir_.path(), Flags());
  HttpClient http(server->rest_port());
  EXPECT_NE(Answer(http).find("3.0"), std::string::npos) << Answer(http);
  EXPECT_NE(server->Log().find("event=s3_version_fetched url=s3://models/zoo/hp/1"), std::string::npos)
      << server->Log();
  EXPECT_TRUE(fs::exists(dir_ / "cache" / "models" / "zoo" / "hp" / "1" / "MANIFEST.sha256"));

  // Version 2 (y = 2x) arrives without its manifest: it fails to load, and 1 keeps serving.
  WriteVersionModel(dir_ / "local", 2);
  s3_.Put(BundleObjects(dir_ / "local" / "2", "zoo/hp/2/", /*without_manifest=*/true));
  ASSERT_TRUE(WaitFor([&] { return server->Log().find("event=version_load_failed model=hp version=2") !=
                                   std::string::npos; }))
      << server->Log();
  EXPECT_NE(Answer(http).find("3.0"), std::string::npos);
  // The manifest lands: the next poll sees the listing change, fetches and serves 2.
  s3_.Put({BundleObjects(dir_ / "local" / "2", "zoo/hp/2/").back()});
  ASSERT_TRUE(WaitFor([&] { return Answer(http).find("4.0") != std::string::npos; })) << server->Log();
  // Version 1, no longer served, leaves the cache.
  const fs::path cache = dir_ / "cache" / "models" / "zoo" / "hp";
  EXPECT_TRUE(WaitFor([&] { return !fs::exists(cache / "1"); })) << server->Log();
  EXPECT_FALSE(fs::exists(cache / "1.lockstep-s3-listing"));
  EXPECT_TRUE(fs::exists(cache / "2" / "MANIFEST.sha256"));

  // A restart finds version 2 in the cache: nothing is downloaded.
  server.reset();
  server = std::make_unique<ServerProcess>(dir_.path(), Flags());
  HttpClient again(server->rest_port());
  EXPECT_NE(Answer(again).find("4.0"), std::string::npos) << Answer(again);
  EXPECT_EQ(server->Log().find("event=s3_version_fetched"), std::string::npos) << server->Log();
}

TEST_F(S3RepositoryTest, AnS3ServerDownAtStartDelaysTheModelNotTheServer) {
  WriteHalfPlusTwo(dir_ / "local", 1);
  s3_.Put(BundleObjects(dir_ / "local" / "1", "zoo/hp/1/"));
  s3_.Stop();
  ServerProcess server(dir_.path(), Flags());
  HttpClient http(server.rest_port());
  EXPECT_EQ(http.Get("/v2/health/live").status, 200);
  EXPECT_NE(http.Get("/v2/models/hp/ready").status, 200) << "the model cannot be ready without its versions";
  EXPECT_NE(server.Log().find("event=source_error model=hp"), std::string::npos) << server.Log();
  s3_.Start();
  ASSERT_TRUE(WaitFor([&] { return Answer(http).find("3.0") != std::string::npos; })) << server.Log();
  EXPECT_EQ(http.Get("/v2/models/hp/ready").status, 200);
}

// A download that fails (here the cache cannot be written: a file stands where its directory
// goes; a server killed mid-transfer fails the same way) is tried again at the next poll, though
// the version's objects did not change.
TEST_F(S3RepositoryTest, AFailedDownloadIsRetriedAtTheNextPoll) {
  WriteHalfPlusTwo(dir_ / "local", 1);
  s3_.Put(BundleObjects(dir_ / "local" / "1", "zoo/hp/1/"));
  test::WriteFile(dir_ / "cache", "not a directory");
  ServerProcess server(dir_.path(), Flags());
  HttpClient http(server.rest_port());
  ASSERT_TRUE(WaitFor([&] { return server.Log().find("event=version_load_failed model=hp version=1") !=
                                   std::string::npos; }))
      << server.Log();
  EXPECT_EQ(Answer(http).find("3.0"), std::string::npos);
  fs::remove(dir_ / "cache");
  ASSERT_TRUE(WaitFor([&] { return Answer(http).find("3.0") != std::string::npos; })) << server.Log();
}

// What our own tools write to S3 is served: model-cli publish (a version made locally) and
// model-train --export_dir s3:// (trained, then published), and a refused key stops model-train
// before it trains, naming the bucket and the HTTP status.
TEST_F(S3RepositoryTest, ModelCliAndModelTrainPublishIntoS3) {
  WriteHalfPlusTwo(dir_ / "local", 1);
  const std::string cli = MODEL_CLI_PATH;
  test::CommandResult published =
      test::RunCommand(cli + " publish --dir " + (dir_ / "local" / "1").string() + " --to s3://models/zoo/hp 2>&1");
  ASSERT_EQ(published.exit_code, 0) << published.output;
  EXPECT_NE(published.output.find("as s3://models/zoo/hp/1\n"), std::string::npos) << published.output;
  {
    ServerProcess server(dir_.path(), Flags());
    HttpClient http(server.rest_port());
    EXPECT_NE(Answer(http).find("3.0"), std::string::npos) << Answer(http);
  }
  published = test::RunCommand(cli + " publish --dir " + (dir_ / "local" / "1").string() +
                               " --to s3://models/zoo/hp --version 1 2>&1");
  EXPECT_EQ(published.exit_code, 1) << published.output;
  EXPECT_NE(published.output.find("s3://models/zoo/hp/1/: the version exists"), std::string::npos)
      << published.output;

  nlohmann::json config = nlohmann::json::parse(
      std::ifstream(std::string(LOCKSTEP_SOURCE_DIR) + "/config/train/diabetes.json"));
  config["data"]["train"] = std::string(LOCKSTEP_SOURCE_DIR) + "/examples/data/diabetes.csv";
  std::ofstream(dir_ / "diabetes.json") << config.dump();
  const std::string train = std::string(MODEL_TRAIN_PATH) + " --config " + (dir_ / "diabetes.json").string() +
                            " --epochs 2 --replicas 1 --export_dir s3://models/zoo/diabetes 2>&1";
  const test::CommandResult refused = test::RunCommand("AWS_ACCESS_KEY_ID=NOT-A-KEY " + train);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("listing s3://models/zoo/diabetes/: HTTP 403"), std::string::npos) << refused.output;
  EXPECT_EQ(refused.output.find("epoch"), std::string::npos) << refused.output;

  const test::CommandResult trained = test::RunCommand(train);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("exported s3://models/zoo/diabetes/1\n"), std::string::npos) << trained.output;
  ServerProcess server(dir_.path(), {"--model_name=diabetes", "--model_base_path=s3://models/zoo/diabetes",
                                     "--model_cache_dir=" + (dir_ / "cache").string()});
  HttpClient http(server.rest_port());
  const HttpResult status = http.Get("/v1/models/diabetes");
  EXPECT_NE(status.body.find("AVAILABLE"), std::string::npos) << status.body << server.Log();
  const HttpResult metadata = http.Get("/v1/models/diabetes/metadata");
  EXPECT_EQ(metadata.status, 200) << metadata.body;
}

}  // namespace
}  // namespace lockstep::e2e
