#include <gtest/gtest.h>

#include <fstream>

#include "model_store/source.h"
#include "model_store/version_policy.h"
#include "tests/model_store/store_test_util.h"

namespace lockstep {
namespace {

using store_test::ScratchDir;

TEST(ParseVersionDirName, TakesPositiveIntegersWithOrWithoutLeadingZeros) {
  EXPECT_EQ(ParseVersionDirName("1"), 1);
  EXPECT_EQ(ParseVersionDirName("42"), 42);
  EXPECT_EQ(ParseVersionDirName("007"), 7);
  EXPECT_EQ(ParseVersionDirName("00000123"), 123);  // TensorFlow's export directories
  EXPECT_EQ(ParseVersionDirName("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(ParseVersionDirName("0009223372036854775807"), INT64_MAX);
  for (const char* bad : {"", "0", "000", "-3", "+3", " 3", "3 ", "3a", "v2", "1e3", "9223372036854775808",
                          "99999999999999999999", ".tmp-1"}) {
    EXPECT_EQ(ParseVersionDirName(bad), std::nullopt) << bad;
  }
}

TEST(ListVersions, ListsVersionDirectoriesAndIgnoresJunk) {
  ScratchDir dir;
  for (const char* d : {"3", "1", "20", "0", "000", "007", "-4", "+5", "6 ", "v7", ".tmp-8", ".tmp-9-abc", "10x",
                        "0020", "00000123"}) {
    std::filesystem::create_directory(dir / d);
  }
  std::ofstream(dir / "11") << "a file, not a version";
  std::ofstream(dir / "README") << "notes";
  StatusOr<std::vector<int64_t>> versions = ListVersions(dir.path());
  ASSERT_TRUE(versions.ok()) << versions.status().ToString();
  EXPECT_EQ(*versions, (std::vector<int64_t>{1, 3, 7, 20, 123}));
  // Each version's directory: its own name, the canonical one where two name it.
  EXPECT_EQ(VersionDir(dir.path(), 7), dir / "007");
  EXPECT_EQ(VersionDir(dir.path(), 20), dir / "20");
  EXPECT_EQ(VersionDir(dir.path(), 123), dir / "00000123");
  std::filesystem::create_directory(dir / "0123");
  EXPECT_EQ(VersionDir(dir.path(), 123), dir / "0123");
  EXPECT_EQ(VersionDir(dir.path(), 99), dir / "99");  // none on disk
}

TEST(ListVersions, EmptyAndMissingBasePaths) {
  ScratchDir dir;
  StatusOr<std::vector<int64_t>> empty = ListVersions(dir.path());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());

  StatusOr<std::vector<int64_t>> missing = ListVersions(dir / "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("does not exist"), std::string::npos);
  EXPECT_NE(missing.status().message().find((dir / "nope").string()), std::string::npos);

  std::ofstream(dir / "file") << "x";
  StatusOr<std::vector<int64_t>> file = ListVersions(dir / "file");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(file.status().message().find("not a directory"), std::string::npos);
}

TEST(AspiredVersions, Latest) {
  const std::vector<int64_t> disk = {5, 1, 3};
  VersionPolicy p;
  EXPECT_EQ(AspiredVersions(p, disk), (std::vector<int64_t>{5}));
  p.num_versions = 2;
  EXPECT_EQ(AspiredVersions(p, disk), (std::vector<int64_t>{3, 5}));
  p.num_versions = 10;
  EXPECT_EQ(AspiredVersions(p, disk), (std::vector<int64_t>{1, 3, 5}));
  EXPECT_TRUE(AspiredVersions(p, {}).empty());
}

TEST(AspiredVersions, AllAndSpecific) {
  const std::vector<int64_t> disk = {5, 1, 3, 3};
  EXPECT_EQ(AspiredVersions({VersionPolicy::kAll, 1, {}}, disk), (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(AspiredVersions({VersionPolicy::kSpecific, 1, {5, 1, 9}}, disk), (std::vector<int64_t>{1, 5}));
  EXPECT_TRUE(AspiredVersions({VersionPolicy::kSpecific, 1, {9}}, disk).empty());
}

}  // namespace
}  // namespace lockstep
