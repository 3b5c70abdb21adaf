// Writing and reading bundles that are intact; the damaged ones are in
// bundle_corruption_test.cc.
#include "runtime/bundle/bundle.h"

#include <gtest/gtest.h>

#include <cstring>
#include <cstdio>
#include <fstream>
#include <vector>

#include "runtime/bundle/manifest.h"
#include "runtime/bundle/file_image.h"
#include "runtime/graph_proto.h"
#include "runtime/page_buffer.h"
#include "tests/runtime/bundle_test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using namespace testing_util;

TEST(BundleTest, RoundTripKeepsGraphSignaturesMetadataAndWeights) {
  ScratchDir tmp;
  const Model model = ConstModel();
  ASSERT_TRUE(WriteBundle(model, tmp / "1").ok());
  auto read = ReadBundle(tmp / "1");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ExpectSameModel(model, *read);
  EXPECT_EQ(read->graph.signatures[0].name, "serving_default");
  EXPECT_EQ(read->graph.signatures[1].name, "counts");
  EXPECT_EQ(read->weights.at("w_empty").num_elements(), 0);
  EXPECT_EQ(read->weights.at("w_empty").shape(), (Shape{0, 4}));
  EXPECT_EQ(read->weights.at("w_scalar").shape(), Shape{});
  EXPECT_EQ(read->weights.at("w_str").data<std::string>()[2], std::string("nul\0byte\n", 9));
  EXPECT_EQ(read->weights.at("w_bf16").data<bfloat16>()[2].bits, 0x7fc1);
}

TEST(BundleTest, MlpRoundTrip) {
  ScratchDir tmp;
  const Model model = MlpModel();
  ASSERT_TRUE(WriteBundle(model, tmp / "7").ok());
  auto read = ReadBundle(tmp / "7");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ExpectSameModel(model, *read);
}

TEST(BundleTest, LayoutIsAsDocumented) {
  ScratchDir tmp;
  BundleWriteOptions options;
  options.assets["vocab.txt"] = "a\nb\n";
  options.extras["tf_serving_warmup_requests"] = "records";
  ASSERT_TRUE(WriteBundle(ConstModel(), tmp / "1", options).ok());
  EXPECT_EQ(DirEntries(tmp / "1"),
            (std::vector<std::string>{"MANIFEST.sha256", "assets", "assets.extra", "model.pb", "weights.bin"}));

  // The manifest is sha256sum's format, sorted, covering every other file.
  auto entries = ParseManifest(ReadFile(tmp / "1" / "MANIFEST.sha256"));
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  std::vector<std::string> listed;
  for (const ManifestEntry& e : *entries) {
    listed.push_back(e.path);
    EXPECT_EQ(e.sha256, Sha256Hex(ReadFile(tmp / "1" / e.path))) << e.path;
  }
  EXPECT_EQ(listed, (std::vector<std::string>{"assets.extra/tf_serving_warmup_requests", "assets/vocab.txt", "model.pb",
                                              "weights.bin"}));

  proto::BundleDef def;
  ASSERT_TRUE(def.ParseFromString(ReadFile(tmp / "1" / "model.pb")));
  EXPECT_EQ(def.format_version(), kBundleFormatVersion);
  const std::string weights = ReadFile(tmp / "1" / "weights.bin");
  uint64_t end = 0;
  for (const proto::WeightEntry& w : def.weights()) {
    EXPECT_EQ(w.offset() % 64, 0u) << w.name();
    EXPECT_GE(w.offset(), end) << w.name();
    // Padding between weights is zero bytes.
    for (uint64_t i = end; i < w.offset(); ++i) EXPECT_EQ(weights[i], '\0') << w.name() << " pad byte " << i;
    end = w.offset() + w.size();
  }
  EXPECT_EQ(end, weights.size());
  // Fixed-size weights are raw little-endian; strings are (uint64 LE length, bytes) per element.
  const proto::WeightEntry* i64 = FindProtoWeight(def, "w_i64");
  ASSERT_NE(i64, nullptr);
  EXPECT_EQ(weights.substr(i64->offset(), 8), std::string("\0\0\0\0\0\0\0\x40", 8));
  const proto::WeightEntry* str = FindProtoWeight(def, "w_str");
  ASSERT_NE(str, nullptr);
  EXPECT_EQ(weights.substr(str->offset(), 13), std::string("\5\0\0\0\0\0\0\0hello", 13));
  EXPECT_EQ(str->size(), 4 * 8 + 5 + 0 + 9 + 300u);
}

TEST(BundleTest, WeightsAreReadOnlyViewsIntoTheMapping) {
  ScratchDir tmp;
  ASSERT_TRUE(WriteBundle(ConstModel(), tmp / "1").ok());
  auto read = ReadBundle(tmp / "1");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  const std::string file = ReadFile(tmp / "1" / "weights.bin");
  proto::BundleDef def;
  ASSERT_TRUE(def.ParseFromString(ReadFile(tmp / "1" / "model.pb")));
  // Every fixed-size weight is a read-only view, and all of them are views of one image of
  // the whole file: each address minus its file offset gives the same base, and the bytes
  // there are the file's.
  const std::byte* base = nullptr;
  for (const auto& [name, t] : read->weights) {
    if (t.dtype() == DType::kString) {
      EXPECT_FALSE(t.read_only()) << name;  // strings are decoded into owned storage
      continue;
    }
    EXPECT_TRUE(t.read_only()) << name;
    if (t.byte_size() == 0) continue;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % kTensorAlignment, 0u) << name;
    const std::byte* b = static_cast<const std::byte*>(t.raw_data()) - FindProtoWeight(def, name)->offset();
    if (base == nullptr) base = b;
    EXPECT_EQ(b, base) << name;
  }
  ASSERT_NE(base, nullptr);
  EXPECT_EQ(std::memcmp(base, file.data(), file.size()), 0);
}

TEST(BundleTest, WeightsOutliveTheModelAndTheFiles) {
  ScratchDir tmp;
  Tensor kept;
  {
    ASSERT_TRUE(WriteBundle(ConstModel(), tmp / "1").ok());
    auto read = ReadBundle(tmp / "1");
    ASSERT_TRUE(read.ok());
    kept = read->weights.at("w_f32");
  }
  fs::remove_all(tmp / "1");
  EXPECT_TRUE(kept.BitwiseEqual(ConstModel().weights.at("w_f32")));
}

// What was read is a copy: rewriting the weights file in place, then truncating it, changes
// nothing (when the weights were a mapping of the file, touching one after the truncation
// ended the process with SIGBUS).
TEST(BundleTest, RewritingOrTruncatingTheFilesAfterReadingChangesNothing) {
  ScratchDir tmp;
  ASSERT_TRUE(WriteBundle(ConstModel(), tmp / "1").ok());
  auto read = ReadBundle(tmp / "1");
  ASSERT_TRUE(read.ok());
  const fs::path weights = tmp / "1" / "weights.bin";
  WriteFile(weights, std::string(fs::file_size(weights), '\xff'));
  fs::resize_file(weights, 0);
  for (const auto& [name, t] : read->weights) {
    EXPECT_TRUE(t.BitwiseEqual(ConstModel().weights.at(name))) << name;
  }
}

TEST(BundleTest, AssetsRoundTrip) {
  ScratchDir tmp;
  BundleWriteOptions options;
  options.assets["vocab.txt"] = "alpha\nbeta\n";
  options.assets["nested/deeper/table.bin"] = std::string("\0\1\2\3", 4);
  options.assets["empty"] = "";
  options.extras["tf_serving_warmup_requests"] = "records";
  ASSERT_TRUE(WriteBundle(ConstModel(), tmp / "3", options).ok());
  for (const auto& [rel, contents] : options.assets) EXPECT_EQ(ReadFile(tmp / "3" / "assets" / rel), contents) << rel;
  EXPECT_EQ(ReadFile(tmp / "3" / "assets.extra" / "tf_serving_warmup_requests"), "records");
  auto read = ReadBundle(tmp / "3");
  EXPECT_TRUE(read.ok()) << read.status().ToString();
  // Checksummed as every other file: a changed one fails the bundle.
  std::ofstream(tmp / "3" / "assets.extra" / "tf_serving_warmup_requests") << "Records";
  read = ReadBundle(tmp / "3");
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("assets.extra/tf_serving_warmup_requests"), std::string::npos)
      << read.status().ToString();
  // As assets, extras' paths stay inside the bundle.
  EXPECT_FALSE(WriteBundle(ConstModel(), tmp / "4", {.extras = {{"../escape", "x"}}}).ok());
}

TEST(BundleTest, EmptyWeightsFile) {
  ScratchDir tmp;
  Model m;
  m.graph.nodes.push_back(InputNode("x", DType::kInt32, Shape{3}));
  m.graph.signatures.push_back({"serving_default", "", {Binding("x", "x", DType::kInt32, Shape{3})},
                                {Binding("y", "x", DType::kInt32, Shape{3})}});
  ASSERT_TRUE(WriteBundle(m, tmp / "1").ok());
  EXPECT_EQ(fs::file_size(tmp / "1" / "weights.bin"), 0u);
  auto read = ReadBundle(tmp / "1");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_TRUE(read->weights.empty());
}

TEST(BundleTest, NoTemporaryDirectoryRemains) {
  ScratchDir tmp;
  ASSERT_TRUE(WriteBundle(ConstModel(), tmp / "1").ok());
  ASSERT_TRUE(WriteBundle(ConstModel(), tmp / "1", {.assets = {}, .overwrite = true}).ok());
  EXPECT_EQ(DirEntries(tmp.path()), std::vector<std::string>{"1"});
}

TEST(BundleTest, RefusesToReplaceWithoutOverwrite) {
  ScratchDir tmp;
  ASSERT_TRUE(WriteBundle(ConstModel(), tmp / "1").ok());
  const std::string before = ReadFile(tmp / "1" / "model.pb");
  Status s = WriteBundle(ConstModel(), tmp / "1");
  EXPECT_TRUE(IsError(s, StatusCode::kAlreadyExists, {(tmp / "1").string(), "already exists"}));
  EXPECT_EQ(ReadFile(tmp / "1" / "model.pb"), before);
  EXPECT_EQ(DirEntries(tmp.path()), std::vector<std::string>{"1"});
}

TEST(BundleTest, OverwriteReplacesTheBundle) {
  ScratchDir tmp;
  ASSERT_TRUE(WriteBundle(ConstModel(), tmp / "1", {.assets = {{"old.txt", "old"}}}).ok());
  Model changed = ConstModel();
  changed.graph.metadata["version"] = "2";
  changed.weights["w_i64"] = Tensor::FromVector<int64_t>({3}, {7, 8, 9});
  ASSERT_TRUE(WriteBundle(changed, tmp / "1", {.assets = {{"new.txt", "new"}}, .overwrite = true}).ok());
  auto read = ReadBundle(tmp / "1");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ExpectSameModel(changed, *read);
  EXPECT_FALSE(fs::exists(tmp / "1" / "assets" / "old.txt"));
  EXPECT_EQ(ReadFile(tmp / "1" / "assets" / "new.txt"), "new");
  EXPECT_EQ(DirEntries(tmp.path()), std::vector<std::string>{"1"});
}

TEST(BundleTest, OverwriteOfAMissingDestinationJustWrites) {
  ScratchDir tmp;
  ASSERT_TRUE(WriteBundle(ConstModel(), tmp / "base" / "12", {.assets = {}, .overwrite = true}).ok());
  EXPECT_TRUE(ReadBundle(tmp / "base" / "12").ok());
}

TEST(BundleTest, TrailingSlashNamesTheSameDirectory) {
  ScratchDir tmp;
  ASSERT_TRUE(WriteBundle(ConstModel(), (tmp / "5").string() + "/").ok());
  EXPECT_TRUE(ReadBundle((tmp / "5").string() + "/").ok());
  EXPECT_EQ(DirEntries(tmp.path()), std::vector<std::string>{"5"});
}

TEST(BundleTest, InvalidModelIsNotWritten) {
  ScratchDir tmp;
  Model m = ConstModel();
  m.graph.nodes.push_back({"bad", "NoSuchOp", {}, {}});
  Status s = WriteBundle(m, tmp / "1");
  EXPECT_TRUE(IsError(s, StatusCode::kInvalidArgument, {(tmp / "1").string(), "NoSuchOp"}));
  EXPECT_TRUE(DirEntries(tmp.path()).empty());
}

TEST(BundleTest, FailedWriteLeavesNothingBehind) {
  ScratchDir tmp;
  // "a" is written as a file, then "a/b" needs it to be a directory: fails mid-write, after
  // the temporary directory holds weights.bin and model.pb.
  Status s = WriteBundle(ConstModel(), tmp / "1", {.assets = {{"a", "x"}, {"a/b", "y"}}});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find((tmp / "1").string()), std::string::npos) << s.ToString();
  EXPECT_TRUE(DirEntries(tmp.path()).empty());
}

TEST(BundleTest, FailedOverwriteKeepsTheOldBundle) {
  ScratchDir tmp;
  ASSERT_TRUE(WriteBundle(ConstModel(), tmp / "1").ok());
  Model m = ConstModel();
  // protobuf cannot store a string field that is not UTF-8; found while writing model.pb.
  m.graph.metadata["bad"] = std::string("\xff\xfe", 2);
  Status s = WriteBundle(m, tmp / "1", {.assets = {}, .overwrite = true});
  EXPECT_TRUE(IsError(s, StatusCode::kInvalidArgument, {(tmp / "1").string(), "UTF-8"}));
  EXPECT_EQ(DirEntries(tmp.path()), std::vector<std::string>{"1"});
  EXPECT_TRUE(ReadBundle(tmp / "1").ok());
}

TEST(BundleTest, RejectsAssetPathsThatLeaveTheBundle) {
  ScratchDir tmp;
  for (const char* bad : {"../escape", "/abs", "a/../../b", "", "a//b", "back\\slash", "new\nline"}) {
    Status s = WriteBundle(ConstModel(), tmp / "1", {.assets = {{bad, "x"}}});
    EXPECT_TRUE(IsError(s, StatusCode::kInvalidArgument, {"asset"})) << bad;
  }
  EXPECT_TRUE(DirEntries(tmp.path()).empty());
}

TEST(BundleManifestTest, FormatAndParse) {
  std::vector<ManifestEntry> entries{{std::string(64, 'b'), "weights.bin"}, {std::string(64, 'a'), "model.pb"}};
  const std::string text = FormatManifest(entries);
  EXPECT_EQ(text, std::string(64, 'a') + "  model.pb\n" + std::string(64, 'b') + "  weights.bin\n");
  auto parsed = ParseManifest(text);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].path, "model.pb");
}

TEST(BundleManifestTest, RejectsMalformedInput) {
  const std::string h(64, 'a');
  const std::pair<std::string, std::string> cases[] = {
      {h + "  model.pb", "newline"},
      {h + " model.pb\n", "two spaces"},
      {h + " *model.pb\n", "two spaces"},
      {std::string(64, 'A') + "  model.pb\n", "lowercase hex"},
      {std::string(63, 'a') + "  model.pb\n", "lowercase hex"},
      {h + "  /etc/passwd\n", "absolute"},
      {h + "  ../x\n", "'..'"},
      {h + "  a/./b\n", "'.'"},
      {h + "  \n", "malformed"},
      {h + "  x\n" + h + "  x\n", "second time"},
      {"\n", "malformed"},
  };
  for (const auto& [text, fragment] : cases) {
    EXPECT_TRUE(IsError(ParseManifest(text).status(), StatusCode::kDataLoss, {"line", fragment})) << text;
  }
  EXPECT_TRUE(ParseManifest("").ok());
}

TEST(BundleSha256Test, KnownVectors) {
  EXPECT_EQ(Sha256Hex(std::string_view("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex(std::string_view("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  ScratchDir tmp;
  WriteFile(tmp / "f", "abc");
  auto h = Sha256File(tmp / "f");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, Sha256Hex(std::string_view("abc")));
  EXPECT_EQ(Sha256File(tmp / "missing").status().code(), StatusCode::kNotFound);
}

TEST(BundleFileImageTest, EmptyAndMissingFiles) {
  ScratchDir tmp;
  WriteFile(tmp / "empty", "");
  auto empty = FileImage::Read(tmp / "empty");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ((*empty)->size(), 0u);
  EXPECT_TRUE((*empty)->bytes().empty());
  EXPECT_EQ(FileImage::Read(tmp / "missing").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(FileImage::Read(tmp.path()).ok());  // a directory
  WriteFile(tmp / "big", std::string(100, 'x'));
  EXPECT_TRUE(IsError(FileImage::Read(tmp / "big", 99).status(), StatusCode::kInvalidArgument, {"big", "limit"}));
  auto big = FileImage::Read(tmp / "big");
  ASSERT_TRUE(big.ok());
  EXPECT_TRUE((*big)->Contains((*big)->data() + 10, 90));
  EXPECT_FALSE((*big)->Contains((*big)->data() + 10, 91));
}

// The consumer sees every byte once, in order, however the read is cut: below the size where a
// second thread reads ahead, and above it (several chunks, the last one short). Above it the
// parts end where the helper's reads end, at a whole MiB or at the end of the file; how many
// parts there are depends on how far the helper got each time the consumer looked (all of it,
// on a busy machine, before the first look).
TEST(BundleFileImageTest, ConsumerSeesEveryByteInOrder) {
  ScratchDir tmp;
  for (size_t size : {size_t{1000}, (size_t{9} << 20) + 12345}) {
    std::string content(size, '\0');
    for (size_t i = 0; i < size; ++i) content[i] = static_cast<char>((i * 2654435761u) >> 13);
    WriteFile(tmp / "f", content);
    std::string seen;
    std::vector<size_t> part_ends;
    auto image = FileImage::Read(tmp / "f", size, [&](std::span<const std::byte> part) {
      seen.append(reinterpret_cast<const char*>(part.data()), part.size());
      part_ends.push_back(seen.size());
    });
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    EXPECT_EQ(seen, content) << size;
    EXPECT_EQ(std::string(reinterpret_cast<const char*>((*image)->data()), (*image)->size()), content);
    if (size < (size_t{8} << 20)) {
      EXPECT_EQ(part_ends.size(), 1u);
    }
    for (size_t end : part_ends) EXPECT_TRUE(end % (size_t{1} << 20) == 0 || end == size) << end << " of " << size;
    // The hash as the reader computes it, while reading, is the hash of the whole.
    Sha256Hasher hasher;
    ASSERT_TRUE(FileImage::Read(tmp / "f", size, [&](std::span<const std::byte> p) { hasher.Update(p); }).ok());
    EXPECT_EQ(hasher.FinishHex(), Sha256Hex(std::string_view(content)));
  }
}

// A file cut short while the helper thread reads it ahead of the consumer is DataLoss, as it
// is for a plain read. The consumer cuts it on its first call; the helper may, rarely, have
// read it all by then, so a few tries are allowed.
TEST(BundleFileImageTest, AFileThatShrinksDuringAnOverlappedReadIsDataLoss) {
  ScratchDir tmp;
  const fs::path path = tmp / "f";
  bool seen = false;
  for (int attempt = 0; attempt < 5 && !seen; ++attempt) {
    WriteFile(path, std::string(size_t{64} << 20, 'x'));
    bool cut = false;
    auto image = FileImage::Read(path, UINT64_MAX, [&](std::span<const std::byte>) {
      if (!cut) fs::resize_file(path, size_t{2} << 20);
      cut = true;
    });
    if (!image.ok()) {
      EXPECT_TRUE(IsError(image.status(), StatusCode::kDataLoss, {"shrank while it was read"})) << image.status().ToString();
      seen = true;
    }
  }
  EXPECT_TRUE(seen) << "the helper read 64 MiB before the consumer's first call, five times";
}

// A consumer that throws stops the read-ahead thread (left running, it would end the process
// or write into freed memory): the exception reaches the caller.
TEST(BundleFileImageTest, AConsumerThatThrowsStopsTheRead) {
  ScratchDir tmp;
  WriteFile(tmp / "f", std::string(size_t{16} << 20, 'x'));
  EXPECT_THROW((void)FileImage::Read(tmp / "f", UINT64_MAX, [](std::span<const std::byte>) {
    throw std::runtime_error("consumer failed");
  }), std::runtime_error);
}

// The permissions of the mapping holding `p`, as /proc/self/maps shows them ("rw-p").
std::string MappingPermissions(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto address = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    uintptr_t begin = 0, end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &begin, &end, perms) == 3 && begin <= address && address < end) {
      return perms;
    }
  }
  return "";
}

TEST(PageBufferTest, BuffersAreZeroedAlignedAndProtectable) {
  EXPECT_FALSE(PageBuffer::Allocate(0).ok());
  for (size_t size : {size_t{100}, PageBuffer::kHugePage + 1, size_t{7} * PageBuffer::kHugePage}) {
    auto buffer = PageBuffer::Allocate(size);
    ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
    ASSERT_EQ(buffer->size(), size);
    const auto address = reinterpret_cast<uintptr_t>(buffer->data());
    EXPECT_EQ(address % (size >= PageBuffer::kHugePage ? PageBuffer::kHugePage : 4096), 0u) << size;
    for (size_t i = 0; i < size; i += 4093) ASSERT_EQ(buffer->data()[i], std::byte{0}) << i;
    EXPECT_EQ(buffer->data()[size - 1], std::byte{0});
    buffer->data()[size - 1] = std::byte{7};  // the whole size is writable
    PageBuffer moved = std::move(buffer).value();
    EXPECT_EQ(moved.data()[size - 1], std::byte{7});
    EXPECT_EQ(MappingPermissions(moved.data()), "rw-p");
    ASSERT_TRUE(moved.Protect().ok());
    EXPECT_EQ(MappingPermissions(moved.data()), "r--p");
  }
  // AllocateZeroedLarge: small sizes from the aligned allocator, large ones page-backed;
  // both zeroed and 64-byte aligned.
  for (size_t size : {size_t{64}, size_t{3} << 20}) {
    std::shared_ptr<void> p = AllocateZeroedLarge(size);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.get()) % 64, 0u);
    const auto* bytes = static_cast<const std::byte*>(p.get());
    EXPECT_EQ(bytes[0], std::byte{0});
    EXPECT_EQ(bytes[size - 1], std::byte{0});
  }
}

}  // namespace
}  // namespace lockstep
