// Damaged and hostile bundles: every case must be an error with the right code and a message
// that names the file and the problem; none may crash.
#include <gtest/gtest.h>

#include <random>

#include "runtime/bundle/bundle.h"
#include "tests/runtime/bundle_test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using namespace testing_util;

class BundleCorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BundleWriteOptions options;
    options.assets["vocab.txt"] = "alpha\nbeta\ngamma\n";
    ASSERT_TRUE(WriteBundle(ConstModel(), dir_, options).ok());
    ASSERT_TRUE(ReadBundle(dir_).ok());
  }

  Status Read() { return ReadBundle(dir_).status(); }
  fs::path File(const std::string& rel) const { return dir_ / rel; }
  void Truncate(const std::string& rel, uint64_t drop) {
    fs::resize_file(File(rel), fs::file_size(File(rel)) - drop);
  }
  // Overwrites bytes of weights.bin at the offset model.pb gives for `weight`.
  void PatchWeight(const std::string& weight, uint64_t at, const std::string& bytes) {
    proto::BundleDef def;
    ASSERT_TRUE(def.ParseFromString(ReadFile(File("model.pb"))));
    std::string data = ReadFile(File("weights.bin"));
    data.replace(FindProtoWeight(def, weight)->offset() + at, bytes.size(), bytes);
    WriteFile(File("weights.bin"), data);
    RecomputeManifest(dir_);
  }

  ScratchDir scratch_;
  fs::path dir_ = scratch_ / "1";
};

// --- Missing pieces -----------------------------------------------------------------------

TEST_F(BundleCorruptionTest, MissingDirectory) {
  EXPECT_TRUE(IsError(ReadBundle(scratch_ / "2").status(), StatusCode::kNotFound, {(scratch_ / "2").string(), "does not exist"}));
  EXPECT_TRUE(IsError(ReadBundle(File("model.pb")).status(), StatusCode::kNotFound, {"model.pb", "not a directory"}));
}

TEST_F(BundleCorruptionTest, MissingModelProto) {
  fs::remove(File("model.pb"));
  EXPECT_TRUE(IsError(Read(), StatusCode::kNotFound, {File("model.pb").string(), "missing"}));
}

TEST_F(BundleCorruptionTest, MissingWeights) {
  fs::remove(File("weights.bin"));
  EXPECT_TRUE(IsError(Read(), StatusCode::kNotFound, {File("weights.bin").string(), "missing"}));
}

TEST_F(BundleCorruptionTest, MissingManifest) {
  fs::remove(File("MANIFEST.sha256"));
  EXPECT_TRUE(IsError(Read(), StatusCode::kNotFound, {"MANIFEST.sha256", "missing"}));
}

TEST_F(BundleCorruptionTest, MissingAsset) {
  fs::remove(File("assets/vocab.txt"));
  EXPECT_TRUE(IsError(Read(), StatusCode::kNotFound, {"assets/vocab.txt", "missing"}));
}

TEST_F(BundleCorruptionTest, ManifestMustListModelAndWeights) {
  for (const std::string file : {"model.pb", "weights.bin"}) {
    std::string text = ReadFile(File("MANIFEST.sha256"));
    const size_t at = text.find("  " + file + "\n");
    ASSERT_NE(at, std::string::npos);
    const std::string original = text;
    text.erase(at - 64, 64 + 2 + file.size() + 1);
    WriteFile(File("MANIFEST.sha256"), text);
    EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"MANIFEST.sha256", "does not list " + file}));
    WriteFile(File("MANIFEST.sha256"), original);
  }
}

// --- Truncation ---------------------------------------------------------------------------

TEST_F(BundleCorruptionTest, TruncatedWeightsFailsChecksum) {
  Truncate("weights.bin", 10);
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {File("weights.bin").string(), "checksum mismatch"}));
}

TEST_F(BundleCorruptionTest, TruncatedWeightsFailsBoundsCheck) {
  Truncate("weights.bin", 10);
  RecomputeManifest(dir_);
  // Weights are laid out by name; w_str is the last one and now runs past the end.
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"model.pb", "w_str", "weights.bin is only"}));
}

TEST_F(BundleCorruptionTest, TruncatedModelProtoFailsChecksum) {
  Truncate("model.pb", 1);
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {File("model.pb").string(), "checksum mismatch"}));
}

TEST_F(BundleCorruptionTest, TruncatedModelProtoFailsToParse) {
  // The last field is a length-delimited weight entry, so losing any tail byte breaks it.
  Truncate("model.pb", 1);
  RecomputeManifest(dir_);
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"model.pb", "cannot parse"}));
}

TEST_F(BundleCorruptionTest, GarbageModelProtoFailsToParse) {
  WriteFile(File("model.pb"), std::string(100, '\xff'));
  RecomputeManifest(dir_);
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"model.pb", "cannot parse"}));
}

// --- Flipped bytes and bad checksums --------------------------------------------------------

TEST_F(BundleCorruptionTest, FlippedByteInEachFile) {
  for (const std::string rel : {"model.pb", "weights.bin", "assets/vocab.txt"}) {
    const size_t middle = fs::file_size(File(rel)) / 2;
    FlipByte(File(rel), middle);
    EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {File(rel).string(), "checksum mismatch"})) << rel;
    FlipByte(File(rel), middle);
    ASSERT_TRUE(Read().ok()) << rel;
  }
}

TEST_F(BundleCorruptionTest, FlippedByteInManifestChecksum) {
  std::string text = ReadFile(File("MANIFEST.sha256"));
  text[0] = text[0] == '0' ? '1' : '0';  // still hex: the first listed file now mismatches
  WriteFile(File("MANIFEST.sha256"), text);
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"assets/vocab.txt", "checksum mismatch"}));
}

TEST_F(BundleCorruptionTest, WrongChecksumInManifest) {
  std::string text = ReadFile(File("MANIFEST.sha256"));
  const std::string real = Sha256Hex(ReadFile(File("model.pb")));
  const std::string fake = Sha256Hex(std::string_view("something else"));
  text.replace(text.find(real), 64, fake);
  WriteFile(File("MANIFEST.sha256"), text);
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"model.pb", "checksum mismatch", fake, real}));
}

TEST_F(BundleCorruptionTest, MalformedManifestLine) {
  WriteFile(File("MANIFEST.sha256"), ReadFile(File("MANIFEST.sha256")) + "not a checksum line\n");
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"MANIFEST.sha256", "line 4", "malformed"}));
}

TEST_F(BundleCorruptionTest, ManifestPathEscapingTheBundle) {
  const std::string h(64, '0');
  WriteFile(File("MANIFEST.sha256"), ReadFile(File("MANIFEST.sha256")) + h + "  ../2/model.pb\n");
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"MANIFEST.sha256", "line 4", "'..'"}));
  WriteFile(File("MANIFEST.sha256"), h + "  /etc/hostname\n");
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"MANIFEST.sha256", "line 1", "absolute"}));
}

TEST_F(BundleCorruptionTest, DuplicateManifestEntry) {
  const std::string text = ReadFile(File("MANIFEST.sha256"));
  WriteFile(File("MANIFEST.sha256"), text + text.substr(0, text.find('\n') + 1));
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"MANIFEST.sha256", "line 4", "second time"}));
}

TEST_F(BundleCorruptionTest, OversizedManifest) {
  WriteFile(File("MANIFEST.sha256"), std::string(kMaxManifestBytes + 1, '\n'));
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"MANIFEST.sha256", "limit"}));
}

TEST_F(BundleCorruptionTest, UnlistedExtraFile) {
  WriteFile(File("extra.txt"), "surprise");
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"extra.txt", "not listed"}));
  fs::remove(File("extra.txt"));
  WriteFile(File("assets/sneaky.txt"), "surprise");
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"assets/sneaky.txt", "not listed"}));
}

TEST_F(BundleCorruptionTest, SymlinksAreRefused) {
  fs::create_symlink(File("weights.bin"), File("link"));
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"link", "symlink"}));
  fs::remove(File("link"));
  // A listed file replaced by a link to a file elsewhere with the same contents.
  fs::copy_file(File("assets/vocab.txt"), scratch_ / "outside.txt");
  fs::remove(File("assets/vocab.txt"));
  fs::create_symlink(scratch_ / "outside.txt", File("assets/vocab.txt"));
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"assets/vocab.txt", "not a regular file"}));
}

// --- model.pb that parses but is wrong ------------------------------------------------------

TEST_F(BundleCorruptionTest, WrongFormatVersion) {
  RewriteModel(dir_, [](proto::BundleDef& def) { def.set_format_version(kBundleFormatVersion + 1); });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument,
                      {"model.pb", "format_version 2", "supports version 1"}));
  RewriteModel(dir_, [](proto::BundleDef& def) { def.clear_format_version(); });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument, {"model.pb", "format_version 0"}));
}

TEST_F(BundleCorruptionTest, InvalidAttrFromGraphFromProto) {
  RewriteModel(dir_, [](proto::BundleDef& def) {
    (*FindProtoNode(def, "x")->mutable_attrs())["dtype"].set_dtype(static_cast<proto::DataType>(99));
  });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument, {"model.pb", "node 'x'", "attr 'dtype'", "invalid dtype 99"}));
}

TEST_F(BundleCorruptionTest, UnknownOp) {
  RewriteModel(dir_, [](proto::BundleDef& def) { FindProtoNode(def, "c_i32")->set_op("Frobnicate"); });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument, {"model.pb", "c_i32", "unknown op 'Frobnicate'"}));
}

TEST_F(BundleCorruptionTest, SignatureShapeTheGraphDoesNotCompute) {
  RewriteModel(dir_, [](proto::BundleDef& def) {
    auto* shape = def.mutable_signatures(0)->mutable_outputs(0)->mutable_shape();
    shape->set_dims(0, 3);
    shape->set_dims(1, 2);
  });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument,
                      {"model.pb", "signature 'serving_default' output 'y'", "float32[3,2]", "float32[2,3]"}));
}

TEST_F(BundleCorruptionTest, SignatureOutputNamesMissingNode) {
  RewriteModel(dir_, [](proto::BundleDef& def) { def.mutable_signatures(0)->mutable_outputs(0)->set_tensor("ghost"); });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument,
                      {"model.pb", "signature 'serving_default' output 'y'", "ghost"}));
}

TEST_F(BundleCorruptionTest, SignatureInputThatIsNotAnInputNode) {
  RewriteModel(dir_, [](proto::BundleDef& def) { def.mutable_signatures(0)->mutable_inputs(0)->set_tensor("c_f32"); });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument,
                      {"model.pb", "signature 'serving_default' input 'x'", "not an Input node"}));
}

TEST_F(BundleCorruptionTest, NodeNamesMissingWeight) {
  RewriteModel(dir_, [](proto::BundleDef& def) {
    (*FindProtoNode(def, "c_i32")->mutable_attrs())["weight"].set_s("nonexistent");
  });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument, {"model.pb", "c_i32", "weight 'nonexistent'"}));
}

TEST_F(BundleCorruptionTest, MatMulInnerDimensionsDiffer) {
  ASSERT_TRUE(WriteBundle(MlpModel(), scratch_ / "mlp").ok());
  RewriteModel(scratch_ / "mlp", [](proto::BundleDef& def) {
    (*FindProtoNode(def, "x")->mutable_attrs())["shape"].mutable_shape()->set_dims(1, 5);
    def.mutable_signatures(0)->mutable_inputs(0)->mutable_shape()->set_dims(1, 5);
  });
  EXPECT_TRUE(IsError(ReadBundle(scratch_ / "mlp").status(), StatusCode::kInvalidArgument, {"model.pb", "node 'mm'", "inner dimension"}));
}

TEST_F(BundleCorruptionTest, MlpSignatureShapeMismatch) {
  ASSERT_TRUE(WriteBundle(MlpModel(), scratch_ / "mlp").ok());
  RewriteModel(scratch_ / "mlp", [](proto::BundleDef& def) {
    def.mutable_signatures(0)->mutable_outputs(0)->mutable_shape()->set_dims(1, 4);
  });
  EXPECT_TRUE(IsError(ReadBundle(scratch_ / "mlp").status(), StatusCode::kInvalidArgument,
                      {"model.pb", "output 'y'", "float32[-1,4]", "float32[-1,3]"}));
}

TEST_F(BundleCorruptionTest, Cycle) {
  ASSERT_TRUE(WriteBundle(MlpModel(), scratch_ / "mlp").ok());
  RewriteModel(scratch_ / "mlp", [](proto::BundleDef& def) { FindProtoNode(def, "mm")->set_inputs(0, "y"); });
  EXPECT_TRUE(IsError(ReadBundle(scratch_ / "mlp").status(), StatusCode::kInvalidArgument, {"model.pb", "cycle"}));
}

// --- Weight entries -----------------------------------------------------------------------

TEST_F(BundleCorruptionTest, MisalignedWeightOffset) {
  RewriteModel(dir_, [](proto::BundleDef& def) { FindProtoWeight(def, "w_f32")->set_offset(FindProtoWeight(def, "w_f32")->offset() + 4); });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument, {"model.pb", "'w_f32'", "not a multiple of 64"}));
}

TEST_F(BundleCorruptionTest, WeightOutOfBounds) {
  RewriteModel(dir_, [](proto::BundleDef& def) { FindProtoWeight(def, "w_f32")->set_offset(uint64_t{1} << 20); });
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"model.pb", "'w_f32'", "weights.bin is only"}));
}

TEST_F(BundleCorruptionTest, WeightOffsetThatWouldOverflow) {
  // offset + size wraps around 2^64 to a small number; a naive bounds check would pass it.
  RewriteModel(dir_, [](proto::BundleDef& def) { FindProtoWeight(def, "w_f32")->set_offset(~uint64_t{63}); });
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"model.pb", "'w_f32'", "weights.bin is only"}));
}

TEST_F(BundleCorruptionTest, WeightSizeMismatch) {
  RewriteModel(dir_, [](proto::BundleDef& def) { FindProtoWeight(def, "w_f32")->set_size(25); });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument, {"model.pb", "'w_f32'", "size 25", "takes 24 bytes"}));
}

TEST_F(BundleCorruptionTest, HugeWeightShape) {
  RewriteModel(dir_, [](proto::BundleDef& def) {
    auto* shape = FindProtoWeight(def, "w_f32")->mutable_shape();
    shape->set_dims(0, int64_t{1} << 40);
    shape->set_dims(1, int64_t{1} << 40);
  });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument, {"model.pb", "'w_f32'", "more than"}));
}

TEST_F(BundleCorruptionTest, HugeStringWeightShape) {
  // Strings are allocated per element, so the count must be refused before any allocation.
  RewriteModel(dir_, [](proto::BundleDef& def) {
    auto* shape = FindProtoWeight(def, "w_str")->mutable_shape();
    shape->set_dims(0, int64_t{1} << 40);
    shape->set_dims(1, int64_t{1} << 40);
  });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument, {"model.pb", "'w_str'", "more than"}));
}

TEST_F(BundleCorruptionTest, WeightShapeNotFullyDefinedOrTooDeep) {
  RewriteModel(dir_, [](proto::BundleDef& def) { FindProtoWeight(def, "w_f32")->mutable_shape()->set_dims(0, -1); });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument, {"model.pb", "'w_f32'", "unknown dimension"}));
  RewriteModel(dir_, [](proto::BundleDef& def) {
    auto* shape = FindProtoWeight(def, "w_f32")->mutable_shape();
    shape->set_dims(0, 2);
    for (int i = 0; i < 8; ++i) shape->add_dims(1);
  });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument, {"model.pb", "'w_f32'", "rank 10"}));
}

TEST_F(BundleCorruptionTest, InvalidWeightDType) {
  RewriteModel(dir_, [](proto::BundleDef& def) { FindProtoWeight(def, "w_f32")->set_dtype(static_cast<proto::DataType>(99)); });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument, {"model.pb", "'w_f32'", "invalid dtype 99"}));
  RewriteModel(dir_, [](proto::BundleDef& def) { FindProtoWeight(def, "w_f32")->set_dtype(proto::DT_INVALID); });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument, {"model.pb", "'w_f32'", "invalid dtype 0"}));
}

TEST_F(BundleCorruptionTest, DuplicateWeightEntry) {
  RewriteModel(dir_, [](proto::BundleDef& def) { *def.add_weights() = *FindProtoWeight(def, "w_i32"); });
  EXPECT_TRUE(IsError(Read(), StatusCode::kInvalidArgument, {"model.pb", "'w_i32'", "appears twice"}));
}

TEST_F(BundleCorruptionTest, StringLengthPastTheEnd) {
  PatchWeight("w_str", 0, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8));
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"model.pb", "'w_str'", "string element 0", "claims"}));
}

TEST_F(BundleCorruptionTest, StringCountBeyondWhatTheBytesHold) {
  RewriteModel(dir_, [](proto::BundleDef& def) {
    FindProtoWeight(def, "w_str")->mutable_shape()->set_dims(0, 1000);
  });
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"model.pb", "'w_str'", "2000 strings cannot fit"}));
}

TEST_F(BundleCorruptionTest, StringEntryWithTrailingBytes) {
  RewriteModel(dir_, [](proto::BundleDef& def) { FindProtoWeight(def, "w_str")->mutable_shape()->set_dims(1, 1); });
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"model.pb", "'w_str'", "follow the last string"}));
}

TEST_F(BundleCorruptionTest, BoolByteThatIsNotABool) {
  PatchWeight("w_bool", 2, "\x02");
  EXPECT_TRUE(IsError(Read(), StatusCode::kDataLoss, {"'w_bool'", "element 2", "neither 0 nor 1"}));
}

// --- Random damage ------------------------------------------------------------------------

TEST_F(BundleCorruptionTest, RandomByteFlipsAreAlwaysErrors) {
  std::vector<std::string> files = BundleFiles(dir_);
  files.push_back("MANIFEST.sha256");
  std::mt19937_64 rng(20240611);
  for (int i = 0; i < 200; ++i) {
    const std::string& rel = files[rng() % files.size()];
    const size_t size = fs::file_size(File(rel));
    if (size == 0) continue;
    const size_t offset = rng() % size;
    const auto mask = static_cast<unsigned char>(1 + rng() % 255);
    FlipByte(File(rel), offset, mask);
    auto read = ReadBundle(dir_);
    EXPECT_FALSE(read.ok()) << "iteration " << i << ": flipping byte " << offset << " of " << rel << " with mask "
                            << int(mask) << " went unnoticed";
    FlipByte(File(rel), offset, mask);
  }
  EXPECT_TRUE(ReadBundle(dir_).ok());
}

TEST_F(BundleCorruptionTest, RandomDamageBehindAValidManifestNeverCrashes) {
  // With the manifest recomputed the checksums pass, so the damage reaches the protobuf parser,
  // the weight index checks and the graph checks. Any outcome but a crash, a hang or a
  // sanitizer report is acceptable: some flips (inside a float weight) are harmless.
  const std::string model = ReadFile(File("model.pb"));
  const std::string weights = ReadFile(File("weights.bin"));
  std::mt19937_64 rng(7);
  int errors = 0;
  for (int i = 0; i < 200; ++i) {
    std::string m = model, w = weights;
    std::string& target = rng() % 4 == 0 ? w : m;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) target[rng() % target.size()] ^= static_cast<char>(1 + rng() % 255);
    WriteFile(File("model.pb"), m);
    WriteFile(File("weights.bin"), w);
    RecomputeManifest(dir_);
    auto read = ReadBundle(dir_);
    if (!read.ok()) {
      ++errors;
      EXPECT_FALSE(read.status().message().empty());
    }
  }
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace lockstep
