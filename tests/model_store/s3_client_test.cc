// The S3 client against a real S3-compatible server (s3rver, objects put by boto3): listing
// with a delimiter and across pages, downloads checked by size and MD5 ETag, and the errors a
// repository meets (a missing key, wrong credentials, the server down), each naming what failed
// and never the secret. s3:// URLs and the environment's settings beside them.
#include "model_store/s3/s3_client.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>

#include "tests/common/file_util.h"
#include "tests/model_store/s3_test_util.h"

namespace lockstep {
namespace {

using s3_test::S3rver;
namespace fs = std::filesystem;

S3Settings SettingsFor(const S3rver& server) {
  S3Settings settings;
  settings.endpoint = server.endpoint();
  settings.use_https = false;
  settings.access_key_id = s3_test::kAccessKey;
  settings.secret_access_key = s3_test::kSecretKey;
  settings.attempts = 2;
  settings.first_backoff = std::chrono::milliseconds(10);
  return settings;
}

TEST(S3UrlTest, ParsesBucketAndPrefix) {
  StatusOr<S3Location> a = ParseS3Url("s3://my-bucket/models/mnist");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->bucket, "my-bucket");
  EXPECT_EQ(a->prefix, "models/mnist/");
  EXPECT_EQ(a->Url(), "s3://my-bucket/models/mnist/");
  StatusOr<S3Location> b = ParseS3Url("s3://bucket.one//");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->prefix, "");
  for (const char* bad : {"s3://", "s3:///x", "s3://Upper/x", "s3://ab/x", "s3://-bad/x", "/local/path"}) {
    EXPECT_FALSE(ParseS3Url(bad).ok()) << bad;
  }
  EXPECT_TRUE(IsS3Url("s3://b/x"));
  EXPECT_FALSE(IsS3Url("/models/x"));
}

TEST(S3SettingsTest, ReadsTheAwsAndTfServingVariables) {
  setenv("S3_ENDPOINT", "http://minio.local:9000/", 1);
  setenv("AWS_REGION", "eu-west-1", 1);
  setenv("AWS_ACCESS_KEY_ID", "id", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
  setenv("S3_VERIFY_SSL", "0", 1);
  StatusOr<S3Settings> s = S3SettingsFromEnvironment();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->endpoint, "minio.local:9000");
  EXPECT_FALSE(s->use_https);
  EXPECT_FALSE(s->verify_ssl);
  EXPECT_EQ(s->region, "eu-west-1");
  EXPECT_EQ(s->access_key_id, "id");
  setenv("S3_USE_HTTPS", "maybe", 1);
  StatusOr<S3Settings> bad = S3SettingsFromEnvironment();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("S3_USE_HTTPS='maybe'"), std::string::npos);
  unsetenv("S3_USE_HTTPS");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  EXPECT_FALSE(S3SettingsFromEnvironment().ok());  // a key id without its secret
  for (const char* name : {"S3_ENDPOINT", "AWS_REGION", "AWS_ACCESS_KEY_ID", "S3_VERIFY_SSL"}) unsetenv(name);
}

TEST(S3ListingTest, ParsesPagesPrefixesAndEscapedKeys) {
  StatusOr<S3ListPage> page = ParseListObjectsV2(R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><IsTruncated>true</IsTruncated>
<NextContinuationToken>tok&amp;1</NextContinuationToken>
<Contents><Key>m/a&amp;b.bin</Key><Size>12</Size><ETag>&quot;abc&quot;</ETag></Contents>
<CommonPrefixes><Prefix>m/1/</Prefix></CommonPrefixes></ListBucketResult>)");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(page->next_token, "tok&1");
  ASSERT_EQ(page->listing.objects.size(), 1u);
  EXPECT_EQ(page->listing.objects[0], (S3Object{"m/a&b.bin", 12, "abc"}));
  EXPECT_EQ(page->listing.prefixes, std::vector<std::string>{"m/1/"});
  EXPECT_FALSE(ParseListObjectsV2("<Error><Code>AccessDenied</Code></Error>").ok());
  EXPECT_FALSE(ParseListObjectsV2("not xml").ok());
  EXPECT_EQ(EscapeS3Key("m/1/a b+c.bin"), "m/1/a%20b%2Bc.bin");
}

class S3ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::WriteFile(dir_ / "small", "hello");
    test::WriteFile(dir_ / "big", std::string(300000, 'w'));
    server_.Put({{"base/1/model.pb", (dir_ / "small").string()},
                 {"base/1/weights.bin", (dir_ / "big").string()},
                 {"base/2/model.pb", (dir_ / "small").string()},
                 {"base/2/assets/vocab a+b.txt", (dir_ / "small").string()},
                 {"base/10/model.pb", (dir_ / "small").string()},
                 {"other/x", (dir_ / "small").string()}});
  }

  test::ScratchDir dir_;
  S3rver server_;
};

TEST_F(S3ClientTest, ListsVersionsAndEveryPage) {
  const S3Client client(SettingsFor(server_));
  StatusOr<S3Listing> versions = client.List("models", "base/", "/");
  ASSERT_TRUE(versions.ok()) << versions.status().ToString();
  EXPECT_EQ(versions->prefixes, (std::vector<std::string>{"base/1/", "base/10/", "base/2/"}));
  EXPECT_TRUE(versions->objects.empty());
  // Two keys a page: five objects come in three pages, all of them.
  StatusOr<S3Listing> all = client.List("models", "base/", "", /*page_size=*/2);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->objects.size(), 5u);
  EXPECT_EQ(all->objects[0].key, "base/1/model.pb");
  EXPECT_EQ(all->objects[0].size, 5);
  EXPECT_EQ(all->objects[0].etag, "5d41402abc4b2a76b9719d911017c592");  // MD5 of "hello"
  EXPECT_EQ(all->objects[1].size, 300000);
}

TEST_F(S3ClientTest, DownloadsAreCheckedBeforeTheyCount) {
  const S3Client client(SettingsFor(server_));
  StatusOr<S3Listing> all = client.List("models", "base/", "");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  const fs::path cache = dir_ / "cache";
  for (const S3Object& object : all->objects) {
    const Status got = client.Download("models", object, cache / object.key);
    ASSERT_TRUE(got.ok()) << got.ToString();
  }
  EXPECT_EQ(test::ReadFile(cache / "base/1/weights.bin"), std::string(300000, 'w'));
  EXPECT_EQ(test::ReadFile(cache / "base/2/assets/vocab a+b.txt"), "hello");

  // A size or an ETag other than the listing's (the object changed since): DataLoss, no file.
  S3Object changed = all->objects[0];
  changed.size = 6;
  Status got = client.Download("models", changed, dir_ / "changed");
  EXPECT_EQ(got.code(), StatusCode::kDataLoss) << got.ToString();
  EXPECT_FALSE(fs::exists(dir_ / "changed"));
  EXPECT_FALSE(fs::exists(dir_ / "changed.download"));
  changed = all->objects[0];
  changed.etag = "00000000000000000000000000000000";
  got = client.Download("models", changed, dir_ / "changed");
  EXPECT_EQ(got.code(), StatusCode::kDataLoss) << got.ToString();
  EXPECT_NE(got.message().find("is not its ETag"), std::string::npos);

  // Deleted between listing and reading: NotFound, naming it.
  server_.Put({{"base/10/model.pb", "-"}});
  got = client.Download("models", S3Object{"base/10/model.pb", 5, ""}, dir_ / "gone");
  EXPECT_EQ(got.code(), StatusCode::kNotFound) << got.ToString();
  EXPECT_NE(got.message().find("s3://models/base/10/model.pb: HTTP 404 NoSuchKey"), std::string::npos)
      << got.message();
}

TEST_F(S3ClientTest, WrongCredentialsAndADownServerAreClearErrors) {
  S3Settings wrong = SettingsFor(server_);
  wrong.access_key_id = "NOT-A-KEY";
  wrong.secret_access_key = "very-secret-value";
  StatusOr<S3Listing> refused = S3Client(wrong).List("models", "base/", "/");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("listing s3://models/base/: HTTP 403 InvalidAccessKeyId"),
            std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find("very-secret-value"), std::string::npos);

  StatusOr<S3Listing> no_bucket = S3Client(SettingsFor(server_)).List("nobucket", "", "/");
  EXPECT_EQ(no_bucket.status().code(), StatusCode::kNotFound) << no_bucket.status().ToString();

  server_.Stop();
  const auto start = std::chrono::steady_clock::now();
  StatusOr<S3Listing> down = S3Client(SettingsFor(server_)).List("models", "base/", "/");
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable) << down.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // Back up: the same client lists again.
  server_.Start();
  EXPECT_TRUE(S3Client(SettingsFor(server_)).List("models", "base/", "/").ok());
}

// The server killed mid-download (the connection cut halfway through an object): the attempt
// is retried, and what is left is the whole object or nothing.
TEST_F(S3ClientTest, ADownloadCutHalfwayIsRetriedAndNeverLeftPartial) {
  S3Object weights{"base/1/weights.bin", 300000, ""};
  {
    s3_test::FaultyProxy proxy(server_.endpoint(), "cut", 1);
    S3Settings settings = SettingsFor(server_);
    settings.endpoint = proxy.endpoint();
    const Status got = S3Client(settings).Download("models", weights, dir_ / "once");
    ASSERT_TRUE(got.ok()) << got.ToString();
    EXPECT_EQ(proxy.Faults(), 1);
    EXPECT_EQ(test::ReadFile(dir_ / "once"), std::string(300000, 'w'));
  }
  s3_test::FaultyProxy proxy(server_.endpoint(), "cut", 100);
  S3Settings settings = SettingsFor(server_);
  settings.endpoint = proxy.endpoint();
  const Status got = S3Client(settings).Download("models", weights, dir_ / "never");
  EXPECT_EQ(got.code(), StatusCode::kUnavailable) << got.ToString();
  EXPECT_NE(got.message().find("s3://models/base/1/weights.bin"), std::string::npos) << got.message();
  EXPECT_EQ(proxy.Faults(), settings.attempts);
  EXPECT_FALSE(fs::exists(dir_ / "never"));
  EXPECT_FALSE(fs::exists(dir_ / "never.download"));
}

// A server that answers slowly: a transfer under low_speed_bytes a second for low_speed_time is
// cut and tried again after a backoff; one that is always slow fails in bounded time.
TEST_F(S3ClientTest, ASlowServerIsCutAndTriedAgain) {
  S3Settings settings = SettingsFor(server_);
  settings.low_speed_bytes = 1000;  // the proxy drips 200 bytes a second
  settings.low_speed_time = std::chrono::seconds(1);
  const S3Object weights{"base/1/weights.bin", 300000, ""};
  {
    s3_test::FaultyProxy proxy(server_.endpoint(), "slow", 1);
    settings.endpoint = proxy.endpoint();
    const Status got = S3Client(settings).Download("models", weights, dir_ / "slow-once");
    ASSERT_TRUE(got.ok()) << got.ToString();
    EXPECT_EQ(proxy.Faults(), 1);
    EXPECT_EQ(test::ReadFile(dir_ / "slow-once"), std::string(300000, 'w'));
  }
  s3_test::FaultyProxy proxy(server_.endpoint(), "slow", 100);
  settings.endpoint = proxy.endpoint();
  const auto start = std::chrono::steady_clock::now();
  const Status got = S3Client(settings).Download("models", weights, dir_ / "slow-always");
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(got.code(), StatusCode::kUnavailable) << got.ToString();
  EXPECT_NE(got.message().find("Timeout"), std::string::npos) << got.message();
  EXPECT_EQ(proxy.Faults(), settings.attempts);
  EXPECT_GE(took, std::chrono::seconds(2));   // each attempt waited out low_speed_time
  EXPECT_LT(took, std::chrono::seconds(20));  // and then it stopped
  EXPECT_FALSE(fs::exists(dir_ / "slow-always"));
}

// More versions than one page holds (1000 keys, S3's most): every one is listed.
TEST_F(S3ClientTest, AHugeListingComesWhole) {
  std::vector<std::pair<std::string, std::string>> objects;
  for (int v = 1; v <= 1203; ++v) objects.emplace_back("huge/" + std::to_string(v) + "/x", (dir_ / "small").string());
  server_.Put(objects);
  StatusOr<S3Listing> versions = S3Client(SettingsFor(server_)).List("models", "huge/", "/");
  ASSERT_TRUE(versions.ok()) << versions.status().ToString();
  ASSERT_EQ(versions->prefixes.size(), 1203u);
  std::set<std::string> unique(versions->prefixes.begin(), versions->prefixes.end());
  EXPECT_EQ(unique.size(), 1203u);
  EXPECT_TRUE(unique.contains("huge/1203/"));
}

// Uploads: the object as it was, with the MD5 S3 checks as its ETag; a delete; and errors that
// name what failed.
TEST_F(S3ClientTest, UploadsAndDeletes) {
  const S3Client client(SettingsFor(server_));
  test::WriteFile(dir_ / "up", std::string(200000, 'u'));
  Status put = client.Upload("models", "up/a b/obj", dir_ / "up");
  ASSERT_TRUE(put.ok()) << put.ToString();
  StatusOr<S3Listing> listed = client.List("models", "up/", "");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->objects.size(), 1u);
  EXPECT_EQ(listed->objects[0].key, "up/a b/obj");
  EXPECT_EQ(listed->objects[0].size, 200000);
  ASSERT_TRUE(client.Download("models", listed->objects[0], dir_ / "down").ok());  // its ETag checked
  EXPECT_EQ(test::ReadFile(dir_ / "down"), std::string(200000, 'u'));

  ASSERT_TRUE(client.Delete("models", "up/a b/obj").ok());
  EXPECT_TRUE(client.List("models", "up/", "")->objects.empty());
  EXPECT_TRUE(client.Delete("models", "up/a b/obj").ok());  // gone already: still fine

  put = client.Upload("nobucket", "x", dir_ / "up");
  EXPECT_EQ(put.code(), StatusCode::kNotFound) << put.ToString();
  EXPECT_NE(put.message().find("s3://nobucket/x: HTTP 404 NoSuchBucket"), std::string::npos) << put.message();
  put = client.Upload("models", "x", dir_ / "no-such-file");
  EXPECT_EQ(put.code(), StatusCode::kDataLoss) << put.ToString();
}

}  // namespace
}  // namespace lockstep
