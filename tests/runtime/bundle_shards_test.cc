// Weights written as shards (runtime/bundle/weights_file.h): the layout, the round trip, the
// reader's checks on the set of shards, and FileImage::ReadParts, which reads them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/bundle/bundle.h"
#include "runtime/bundle/file_image.h"
#include "runtime/bundle/manifest.h"
#include "runtime/bundle/weights_file.h"
#include "tests/runtime/bundle_test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using namespace testing_util;

// ConstModel's weights take 700-odd bytes: shards of 100 bytes cut through padding, fixed-size
// weights and string elements alike.
constexpr uint64_t kSmallShard = 100;

Status WriteSharded(const Model& model, const fs::path& dir, uint64_t shard_bytes = kSmallShard) {
  BundleWriteOptions options;
  options.weight_shard_bytes = shard_bytes;
  return WriteBundle(model, dir, options);
}

std::vector<std::string> ShardNames(int count) {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.push_back(WeightFileName(i, count));
  return names;
}

// The shards of the bundle at `dir`, from the names on disk.
int ShardCount(const fs::path& dir) {
  int count = 0;
  for (const std::string& name : DirEntries(dir)) count += name.rfind("weights-", 0) == 0 ? 1 : 0;
  return count;
}

TEST(BundleShardsTest, NamesAreFiveDigitsEach) {
  EXPECT_EQ(WeightFileName(0, 1), "weights.bin");
  EXPECT_EQ(WeightFileName(0, 4), "weights-00000-of-00004.bin");
  EXPECT_EQ(WeightFileName(12, 345), "weights-00012-of-00345.bin");
}

TEST(BundleShardsTest, LayoutIsTheSingleFileCutIntoShards) {
  ScratchDir tmp;
  ASSERT_TRUE(WriteBundle(ConstModel(), tmp / "one").ok());
  ASSERT_TRUE(WriteSharded(ConstModel(), tmp / "cut").ok());
  const std::string whole = ReadFile(tmp / "one" / "weights.bin");
  const int count = static_cast<int>((whole.size() + kSmallShard - 1) / kSmallShard);
  ASSERT_GE(count, 5);

  std::vector<std::string> expected{"MANIFEST.sha256", "model.pb"};
  for (const std::string& name : ShardNames(count)) expected.push_back(name);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(DirEntries(tmp / "cut"), expected);
  // Every shard is a shard long but the last; end to end they are the single file, and
  // model.pb's weight entries are the same (offsets count across the stream).
  std::string joined;
  for (int i = 0; i < count; ++i) {
    const std::string shard = ReadFile(tmp / "cut" / WeightFileName(i, count));
    if (i + 1 < count) {
      EXPECT_EQ(shard.size(), kSmallShard) << i;
    }
    joined += shard;
  }
  EXPECT_EQ(joined, whole);
  proto::BundleDef one, cut;
  ASSERT_TRUE(one.ParseFromString(ReadFile(tmp / "one" / "model.pb")));
  ASSERT_TRUE(cut.ParseFromString(ReadFile(tmp / "cut" / "model.pb")));
  ASSERT_EQ(cut.weights_size(), one.weights_size());
  for (int i = 0; i < one.weights_size(); ++i) {
    EXPECT_EQ(cut.weights(i).SerializeAsString(), one.weights(i).SerializeAsString()) << one.weights(i).name();
  }
  // Each shard has its own line in the manifest, with its own SHA-256.
  auto entries = ParseManifest(ReadFile(tmp / "cut" / "MANIFEST.sha256"));
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), static_cast<size_t>(count) + 1);
  for (const ManifestEntry& e : *entries) EXPECT_EQ(e.sha256, Sha256Hex(ReadFile(tmp / "cut" / e.path))) << e.path;
  auto listed = ListedWeightFiles(*entries);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(*listed, ShardNames(count));
}

TEST(BundleShardsTest, RoundTripIntoOneImage) {
  ScratchDir tmp;
  const Model model = ConstModel();
  ASSERT_TRUE(WriteSharded(model, tmp / "1").ok());
  auto read = ReadBundle(tmp / "1");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ExpectSameModel(model, *read);
  // The fixed-size weights are views into one image of the shards end to end: each address
  // minus the weight's offset in the stream gives the same base.
  proto::BundleDef def;
  ASSERT_TRUE(def.ParseFromString(ReadFile(tmp / "1" / "model.pb")));
  const std::byte* base = nullptr;
  for (const proto::WeightEntry& e : def.weights()) {
    const Tensor& t = read->weights.at(e.name());
    if (t.dtype() == DType::kString || t.byte_size() == 0) continue;
    EXPECT_TRUE(t.read_only()) << e.name();
    const std::byte* b = static_cast<const std::byte*>(t.raw_data()) - e.offset();
    if (base == nullptr) base = b;
    EXPECT_EQ(b, base) << e.name();
  }
  EXPECT_NE(base, nullptr);
}

// The default shard length: a model of 33 MiB of weights is two shards, and an operator can
// still check the bundle with sha256sum.
TEST(BundleShardsTest, LargeWeightsAreShardedByDefaultAndSha256sumChecksThem) {
  ScratchDir tmp;
  Model model = ConstModel();
  const int64_t elements = (int64_t{33} << 20) / 4;
  Tensor big(DType::kFloat32, Shape{elements});
  std::span<float> values = big.mutable_data<float>();
  for (int64_t i = 0; i < elements; ++i) values[static_cast<size_t>(i)] = static_cast<float>(i % 1000);
  model.weights["w_big"] = std::move(big);
  ASSERT_TRUE(WriteBundle(model, tmp / "1").ok());
  EXPECT_EQ(ShardCount(tmp / "1"), 2);
  EXPECT_FALSE(fs::exists(tmp / "1" / "weights.bin"));
  EXPECT_EQ(fs::file_size(tmp / "1" / "weights-00000-of-00002.bin"), kBundleWeightShardBytes);
  const std::string check = "cd '" + (tmp / "1").string() + "' && sha256sum --quiet -c MANIFEST.sha256";
  EXPECT_EQ(std::system(check.c_str()), 0) << check;
  auto read = ReadBundle(tmp / "1");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ExpectSameModel(model, *read);
}

TEST(BundleShardsTest, WriterRefusesShardLengthsItCannotName) {
  ScratchDir tmp;
  BundleWriteOptions options;
  options.weight_shard_bytes = 0;
  EXPECT_TRUE(IsError(WriteBundle(ConstModel(), tmp / "1", options), StatusCode::kInvalidArgument, {"shard size"}));
  Model model = ConstModel();
  model.weights["w_big"] = Tensor(DType::kFloat32, Shape{int64_t{kMaxWeightShards} / 4 + 1000});
  options.weight_shard_bytes = 1;
  EXPECT_TRUE(IsError(WriteBundle(model, tmp / "2", options), StatusCode::kInvalidArgument, {"99999"}));
  EXPECT_FALSE(fs::exists(tmp / "1"));
  EXPECT_FALSE(fs::exists(tmp / "2"));
}

class BundleShardsCorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteSharded(ConstModel(), dir()).ok());
    count_ = ShardCount(dir());
    ASSERT_GE(count_, 5);
  }
  fs::path dir() const { return tmp_ / "1"; }
  fs::path Shard(int i) const { return dir() / WeightFileName(i, count_); }
  Status Read() const { return ReadBundle(dir()).status(); }
  // Rewrites the manifest with `edit` applied to its entries.
  void EditManifest(const std::function<void(std::vector<ManifestEntry>&)>& edit) const {
    auto entries = ParseManifest(ReadFile(dir() / "MANIFEST.sha256"));
    ASSERT_TRUE(entries.ok());
    edit(*entries);
    WriteFile(dir() / "MANIFEST.sha256", FormatManifest(*entries));
  }

  ScratchDir tmp_;
  int count_ = 0;
};

TEST_F(BundleShardsCorruptionTest, AFlippedByteNamesItsShard) {
  FlipByte(Shard(2), 7);
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {Shard(2).string(), "checksum mismatch"}));
}

TEST_F(BundleShardsCorruptionTest, AMissingShardFileIsNamed) {
  fs::remove(Shard(3));
  EXPECT_TRUE(IsError(Read(), StatusCode::kNotFound, {Shard(3).string(), "missing"}));
}

TEST_F(BundleShardsCorruptionTest, AShardTheManifestDoesNotListIsRefused) {
  const std::string gone = WeightFileName(1, count_);
  EditManifest([&](std::vector<ManifestEntry>& entries) {
    std::erase_if(entries, [&](const ManifestEntry& e) { return e.path == gone; });
  });
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"MANIFEST.sha256", "does not list " + gone}));
  fs::remove(dir() / gone);
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"MANIFEST.sha256", "does not list " + gone}));
}

TEST_F(BundleShardsCorruptionTest, MixedSetsAreRefused) {
  // weights.bin beside the shards.
  WriteFile(dir() / "weights.bin", "x");
  EditManifest([&](std::vector<ManifestEntry>& entries) { entries.push_back({Sha256Hex("x"), "weights.bin"}); });
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"MANIFEST.sha256", "lists both weights.bin and shards"}));
  fs::remove(dir() / "weights.bin");
  // A shard of another count.
  const std::string other = WeightFileName(0, count_ + 1);
  WriteFile(dir() / other, "x");
  EditManifest([&](std::vector<ManifestEntry>& entries) {
    std::erase_if(entries, [](const ManifestEntry& e) { return e.path == "weights.bin"; });
    entries.push_back({Sha256Hex("x"), other});
  });
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"MANIFEST.sha256", "lists shards of"}));
}

TEST_F(BundleShardsCorruptionTest, ATruncatedShardIsCaughtByItsChecksumThenByTheEntries) {
  const fs::path last = Shard(count_ - 1);
  fs::resize_file(last, fs::file_size(last) - 5);
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {last.string(), "checksum mismatch"}));
  // With the manifest made to match, the last weight runs past the stream's end.
  RecomputeManifest(dir());
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss,
                      {"model.pb", "weights-*-of-" + WeightFileName(0, count_).substr(17), "is only"}));
}

// Bytes past the last weight entry are refused before the weights are read (a sparse file of
// any length costs nothing to make, and the image would be its length), single file or shards.
TEST_F(BundleShardsCorruptionTest, WeightsLongerThanTheEntriesSayAreRefused) {
  const fs::path last = Shard(count_ - 1);
  WriteFile(last, ReadFile(last) + "trailing");
  RecomputeManifest(dir());
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"hold", "bytes, but model.pb's weight entries end at byte"}));
  ScratchDir tmp;
  ASSERT_TRUE(WriteBundle(ConstModel(), tmp / "1").ok());
  // Sparse: a terabyte on paper. The manifest's checksum no longer matches, but the length is
  // refused before a byte is read or hashed.
  fs::resize_file(tmp / "1" / "weights.bin", uint64_t{1} << 40);
  EXPECT_TRUE(IsError(ReadBundle(tmp / "1").status(), StatusCode::kDataLoss,
                      {"weights.bin is 1099511627776 bytes, but model.pb's weight entries end at byte"}));
}

TEST_F(BundleShardsCorruptionTest, AShardThatIsALinkIsRefused) {
  fs::rename(Shard(0), tmp_ / "elsewhere");
  fs::create_symlink(tmp_ / "elsewhere", Shard(0));
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {Shard(0).string(), "not a regular file"}));
}

TEST(BundleShardsListTest, OnlyExactShardNamesCount) {
  const auto listed = [](std::vector<std::string> paths) {
    std::vector<ManifestEntry> entries;
    for (std::string& p : paths) entries.push_back({std::string(64, 'a'), std::move(p)});
    return ListedWeightFiles(entries);
  };
  auto two = listed({"model.pb", "weights-00001-of-00002.bin", "weights-00000-of-00002.bin"});
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(*two, ShardNames(2));
  // Names in other forms are ordinary files, not shards: none of these is a set of weights.
  for (const char* name : {"weights-00000-of-00001.bin", "weights-0-of-2.bin", "weights--0001-of-00002.bin",
                                  "weights-00002-of-00002.bin", "weights-00000-of-00002.bin.x",
                                  "assets/weights-00000-of-00002.bin", "weights- 0000-of-00002.bin"}) {
    EXPECT_TRUE(IsError(listed({"model.pb", name}).status(), StatusCode::kDataLoss,
                        {"does not list weights.bin or its shards"})) << name;
  }
  EXPECT_TRUE(IsError(listed({"model.pb", "weights-00002-of-00003.bin", "weights-00000-of-00003.bin"}).status(),
                      StatusCode::kDataLoss, {"does not list weights-00001-of-00003.bin"}));
}

class FileImagePartsTest : public ::testing::Test {
 protected:
  std::vector<fs::path> WriteParts(const std::vector<std::string>& contents) {
    std::vector<fs::path> paths;
    for (size_t i = 0; i < contents.size(); ++i) {
      paths.push_back(tmp_ / ("part" + std::to_string(i)));
      WriteFile(paths.back(), contents[i]);
    }
    return paths;
  }
  ScratchDir tmp_;
};

// Parts of several MiB (more than one chunk each), one of them empty, on 1, 2 and 4 threads:
// the image is the parts end to end, and the consumer saw every byte of each part once, in
// order within the part.
TEST_F(FileImagePartsTest, TheImageIsThePartsEndToEnd) {
  std::vector<std::string> contents;
  std::mt19937 rng(7);
  for (size_t size : {size_t{3} << 20, size_t{0}, size_t{5} << 20 | 77, size_t{1} << 20, size_t{12345}}) {
    std::string s(size, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    contents.push_back(std::move(s));
  }
  const std::vector<fs::path> paths = WriteParts(contents);
  std::string joined;
  for (const std::string& c : contents) joined += c;
  for (unsigned threads : {1u, 2u, 4u}) {
    std::vector<std::string> seen(paths.size());
    auto image = FileImage::ReadParts(paths, UINT64_MAX, [&](size_t part, std::span<const std::byte> bytes) {
      seen[part].append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    }, threads);
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    EXPECT_EQ(std::string_view(reinterpret_cast<const char*>((*image)->data()), (*image)->size()), joined) << threads;
    EXPECT_EQ((*image)->path(), paths[0]);
    for (size_t k = 0; k < paths.size(); ++k) EXPECT_TRUE(seen[k] == contents[k]) << "part " << k << ", " << threads;
  }
}

TEST_F(FileImagePartsTest, EmptyPartsMakeAnEmptyImage) {
  auto image = FileImage::ReadParts(WriteParts({"", ""}), UINT64_MAX, [](size_t, std::span<const std::byte>) {});
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ((*image)->size(), 0u);
  EXPECT_FALSE(FileImage::ReadParts({}, UINT64_MAX, [](size_t, std::span<const std::byte>) {}).ok());
}

TEST_F(FileImagePartsTest, ErrorsNameTheFirstPartThatFailed) {
  std::vector<fs::path> paths = WriteParts({"abc", "def", "ghi", "jkl"});
  const auto ignore = [](size_t, std::span<const std::byte>) {};
  fs::remove(paths[2]);
  fs::remove(paths[3]);
  fs::create_directory(paths[3]);
  auto image = FileImage::ReadParts(paths, UINT64_MAX, ignore);
  EXPECT_TRUE(IsError(image.status(), StatusCode::kNotFound, {paths[2].string()})) << image.status().ToString();
  WriteFile(paths[2], "ghi");
  image = FileImage::ReadParts(paths, UINT64_MAX, ignore);
  EXPECT_TRUE(IsError(image.status(), StatusCode::kInvalidArgument, {paths[3].string(), "not a regular file"}))
      << image.status().ToString();
}

}  // namespace
}  // namespace lockstep
