// PublishVersion (version_storage.h): a version directory written into a base path the way
// readers expect to find it whole. Local: copied beside and renamed in, the next version by
// default, a version already there never replaced. S3 (s3rver): every object before the one
// that completes the version, what a failed upload had put deleted again, and the result read
// back by FetchVersion and loaded as the server would.
#include <gtest/gtest.h>

#include "model_store/loader.h"
#include "model_store/s3/s3_client.h"
#include "model_store/version_storage.h"
#include "tests/common/file_util.h"
#include "tests/model_store/s3_test_util.h"
#include "tests/model_store/store_test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using s3_test::FaultyProxy;
using s3_test::S3rver;

StorageOptions S3Storage(const std::string& endpoint, const fs::path& cache) {
  StorageOptions options;
  options.cache_dir = cache;
  options.s3.endpoint = endpoint;
  options.s3.use_https = false;
  options.s3.access_key_id = s3_test::kAccessKey;
  options.s3.secret_access_key = s3_test::kSecretKey;
  options.s3.attempts = 2;
  options.s3.first_backoff = std::chrono::milliseconds(10);
  return options;
}

TEST(PublishVersionTest, LocalVersionsAreRenamedInWholeAndNeverReplaced) {
  test::ScratchDir dir;
  store_test::WriteVersion(dir.path() / "made", 7);
  const fs::path made = dir.path() / "made" / "7";
  const fs::path base = dir.path() / "models" / "m";

  StatusOr<int64_t> v = PublishVersion(made, base.string(), 0, {});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, 1);  // an empty (new) base path starts at 1
  v = PublishVersion(made, base.string(), 0, {});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, 2);
  EXPECT_EQ(test::ReadFile(base / "2" / "MANIFEST.sha256"), test::ReadFile(made / "MANIFEST.sha256"));
  ASSERT_TRUE(LoadVersion("m", 2, base / "2", {}).ok());

  v = PublishVersion(made, base.string(), 2, {});
  EXPECT_EQ(v.status().code(), StatusCode::kAlreadyExists) << v.status().ToString();
  v = PublishVersion(made, base.string(), 10, {});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, 10);
  // Nothing half-made is left beside the versions.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(base)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"1", "10", "2"}));

  EXPECT_EQ(PublishVersion(dir.path() / "nothing", base.string(), 0, {}).status().code(), StatusCode::kNotFound);
}

class S3PublishTest : public ::testing::Test {
 protected:
  void SetUp() override { store_test::WriteVersion(dir_.path() / "made", 3); }
  fs::path Made() const { return dir_.path() / "made" / "3"; }

  test::ScratchDir dir_;
  S3rver server_;
};

TEST_F(S3PublishTest, ObjectsGoFirstTheManifestLastAndTheVersionLoads) {
  FaultyProxy proxy(server_.endpoint(), "pass", 0);
  const StorageOptions storage = S3Storage(proxy.endpoint(), dir_.path() / "cache");
  StatusOr<int64_t> v = PublishVersion(Made(), "s3://models/zoo/m", 0, storage);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, 1);
  std::vector<std::string> puts;
  for (const std::string& line : proxy.Log()) {
    if (line.starts_with("PUT ")) puts.push_back(line.substr(4));
  }
  ASSERT_GE(puts.size(), 2u);
  EXPECT_EQ(puts.back(), "/models/zoo/m/1/MANIFEST.sha256");
  EXPECT_EQ(std::count(puts.begin(), puts.end(), puts.back()), 1);

  v = PublishVersion(Made(), "s3://models/zoo/m/", 0, storage);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, 2);
  EXPECT_EQ(PublishVersion(Made(), "s3://models/zoo/m", 2, storage).status().code(), StatusCode::kAlreadyExists);

  StatusOr<std::vector<int64_t>> versions = ListStoredVersions("s3://models/zoo/m", storage);
  ASSERT_TRUE(versions.ok()) << versions.status().ToString();
  EXPECT_EQ(*versions, (std::vector<int64_t>{1, 2}));
  StatusOr<FetchedVersion> fetched = FetchVersion("s3://models/zoo/m", 2, storage);
  ASSERT_TRUE(fetched.ok()) << fetched.status().ToString();
  StatusOr<std::shared_ptr<const LoadedVersion>> loaded = LoadVersion("m", 2, fetched->dir, {});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
}

TEST_F(S3PublishTest, AFailedUploadTakesBackWhatItPut) {
  // The first PUT goes through, then the server fails every one: the upload fails, and the
  // version it had begun is gone again, so no reader keeps trying a version that never completes.
  const StorageOptions storage = S3Storage(server_.endpoint(), dir_.path() / "cache");
  ASSERT_TRUE(PublishVersion(Made(), "s3://models/zoo/m", 0, storage).ok());
  ASSERT_GE(S3Client(storage.s3).List("models", "zoo/m/1/", "")->objects.size(), 3u);

  FaultyProxy failing(server_.endpoint(), "fail-put-after", 1);
  StatusOr<int64_t> v = PublishVersion(Made(), "s3://models/zoo/m", 0, S3Storage(failing.endpoint(), dir_.path()));
  EXPECT_GE(failing.Faults(), 1);
  EXPECT_EQ(v.status().code(), StatusCode::kUnavailable) << v.status().ToString();
  EXPECT_NE(v.status().message().find("to s3://models/zoo/m/2/"), std::string::npos) << v.status().message();
  EXPECT_NE(v.status().message().find("HTTP 500 InternalError"), std::string::npos) << v.status().message();
  StatusOr<std::vector<int64_t>> versions = ListStoredVersions("s3://models/zoo/m", storage);
  ASSERT_TRUE(versions.ok());
  EXPECT_EQ(*versions, (std::vector<int64_t>{1}));

  // Wrong credentials: refused before anything is put, naming the bucket and the status.
  StorageOptions wrong = storage;
  wrong.s3.access_key_id = "NOT-A-KEY";
  wrong.s3.secret_access_key = "very-secret-value";
  v = PublishVersion(Made(), "s3://models/zoo/m", 0, wrong);
  EXPECT_EQ(v.status().code(), StatusCode::kPermissionDenied) << v.status().ToString();
  EXPECT_NE(v.status().message().find("s3://models/zoo/m/: HTTP 403"), std::string::npos) << v.status().message();
  EXPECT_EQ(v.status().message().find("very-secret-value"), std::string::npos);
}

}  // namespace
}  // namespace lockstep
