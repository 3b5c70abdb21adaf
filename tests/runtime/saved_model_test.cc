// The SavedModel importer on TensorFlow Serving's own test SavedModels (tests/data/): the
// checkpoint's table and CRCs, function inlining, translation into a Session that gives TF
// Serving's answers, and the errors that name what is wrong.
#include "runtime/model_dir.h"
#include "runtime/saved_model/saved_model.h"

#include <gtest/gtest.h>
#include <snappy.h>

#include "runtime/saved_model/checkpoint.h"
#include "tensorflow/core/example/example.pb.h"
#include "runtime/saved_model/snappy.h"
#include "runtime/saved_model/sstable.h"
#include "runtime/session.h"
#include "tensorflow/core/protobuf/saved_model.pb.h"
#include "tests/common/file_util.h"
#include "tests/common/scratch_dir.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using test::ReadFile;
using test::ScratchDir;
using test::WriteFile;

const fs::path kData = fs::path(LOCKSTEP_SOURCE_DIR) / "tests/data/tf_saved_models";
const fs::path kTf1 = kData / "saved_model_half_plus_two_cpu/00000123";
const fs::path kTf2 = kData / "saved_model_half_plus_two_tf2_cpu/00000123";

float ScalarOf(const Tensor& t) {
  return t.data<float>()[0];
}

TEST(SnappyTest, LiteralsAndOverlappingCopies) {
  // Length 9: the literal "ab", a copy of 5 from 2 back (overlapping itself: "ababa"), and a
  // copy of 2 from 7 back with a 16-bit offset ("ab").
  std::string in;
  in += char(9);
  in += char((2 - 1) << 2);  // literal of 2
  in += "ab";
  in += char((1 << 2) | 1);  // copy, len 5, offset 2
  in += char(2);
  in += char(((2 - 1) << 2) | 2);  // copy, len 2, offset 7 (16-bit)
  in += char(7);
  in += char(0);
  StatusOr<std::string> out = SnappyUncompress(in, 100);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "abababaab");
}

TEST(SnappyTest, MalformedInputIsAnErrorNeverAnOverrun) {
  const std::string cases[] = {
      std::string(),                   // no header
      std::string("\x05\x00", 2),      // a literal with no bytes after it
      std::string("\x04\x05\x03", 3),  // a copy from before the start
      std::string("\x02\x04"
                  "abc",
                  5),                          // a copy tag cut short after the literal
      std::string("\xff\xff\xff\xff\x7f", 5),  // length beyond the limit
  };
  for (const std::string& c : cases)
    EXPECT_FALSE(SnappyUncompress(c, 1000).ok()) << ::testing::PrintToString(c);
}

// What Snappy's own compressor writes (a block of repeating keys, as an index table holds)
// comes back whole; the stated length is checked against the limit before anything is made.
TEST(SnappyTest, RoundTripsSnappysOwnBlocksWithinTheLimit) {
  std::string raw;
  for (int i = 0; raw.size() < 100000; ++i) raw += "layer_" + std::to_string(i % 37) + "/kernel/.ATTRIBUTES";
  std::string compressed;
  snappy::Compress(raw.data(), raw.size(), &compressed);
  ASSERT_LT(compressed.size(), raw.size() / 4);
  StatusOr<std::string> out = SnappyUncompress(compressed, raw.size());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, raw);
  StatusOr<std::string> over = SnappyUncompress(compressed, raw.size() - 1);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().message(), "snappy: uncompressed length " + std::to_string(raw.size()) +
                                         " exceeds the limit of " + std::to_string(raw.size() - 1));
  compressed.resize(compressed.size() / 2);  // cut mid-block
  EXPECT_FALSE(SnappyUncompress(compressed, raw.size()).ok());
}

TEST(CheckpointTest, ReadsTheVariablesOfATf1AndATf2SavedModel) {
  StatusOr<Checkpoint> tf1 = Checkpoint::Open(kTf1 / "variables/variables");
  ASSERT_TRUE(tf1.ok()) << tf1.status().ToString();
  EXPECT_EQ(ScalarOf(*tf1->Read("a")), 0.5f);
  EXPECT_EQ(ScalarOf(*tf1->Read("b")), 2.0f);
  EXPECT_EQ(ScalarOf(*tf1->Read("c")), 3.0f);
  EXPECT_EQ(tf1->Read("nope").status().code(), StatusCode::kNotFound);

  StatusOr<Checkpoint> tf2 = Checkpoint::Open(kTf2 / "variables/variables");
  ASSERT_TRUE(tf2.ok()) << tf2.status().ToString();
  EXPECT_EQ(ScalarOf(*tf2->Read("a/.ATTRIBUTES/VARIABLE_VALUE")), 0.5f);
  EXPECT_EQ(ScalarOf(*tf2->Read("b/.ATTRIBUTES/VARIABLE_VALUE")), 2.0f);
  // The object graph is a string tensor, which serving never needs.
  EXPECT_NE(tf2->Read("_CHECKPOINTABLE_OBJECT_GRAPH").status().message().find("string"), std::string::npos);
}

// A copy of the TF1 SavedModel in a scratch directory, to damage.
fs::path CopyTf1(const ScratchDir& scratch) {
  const fs::path dir = scratch / "1";
  fs::copy(kTf1, dir, fs::copy_options::recursive);
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  }
  return dir;
}

TEST(CheckpointTest, AFlippedByteInTheDataFailsItsCrcNamingFileAndVariable) {
  ScratchDir scratch;
  const fs::path dir = CopyTf1(scratch);
  const fs::path data = dir / "variables/variables.data-00000-of-00001";
  std::string bytes = ReadFile(data);
  bytes[8] ^= 0x01;  // inside b (offset 8)
  WriteFile(data, bytes);
  StatusOr<Checkpoint> ckpt = Checkpoint::Open(dir / "variables/variables");
  ASSERT_TRUE(ckpt.ok());
  Status s = ckpt->Read("b").status();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("variables.data-00000-of-00001"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("'b'"), std::string::npos) << s.ToString();
  EXPECT_TRUE(ckpt->Read("a").ok());  // its neighbours are intact
  // The whole model fails to load with that message.
  StatusOr<Model> model = ReadSavedModel(dir);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("CRC"), std::string::npos) << model.status().ToString();
}

TEST(CheckpointTest, ATruncatedOrCorruptedIndexIsAnErrorNamingIt) {
  ScratchDir scratch;
  const fs::path dir = CopyTf1(scratch);
  const fs::path index = dir / "variables/variables.index";
  const std::string original = ReadFile(index);
  for (size_t keep : {size_t{0}, size_t{10}, original.size() / 2, original.size() - 1}) {
    WriteFile(index, original.substr(0, keep));
    Status s = Checkpoint::Open(dir / "variables/variables").status();
    EXPECT_FALSE(s.ok()) << keep;
    EXPECT_NE(s.message().find("variables.index"), std::string::npos) << s.ToString();
  }
  // Every single flipped bit in a block is caught by its CRC (or, in the footer, by the checks
  // of handles and magic); none may crash or read a wrong entry.
  for (size_t i = 0; i < original.size(); ++i) {
    std::string damaged = original;
    damaged[i] ^= 0x10;
    WriteFile(index, damaged);
    StatusOr<Checkpoint> c = Checkpoint::Open(dir / "variables/variables");
    if (c.ok()) {
      // Only the footer's padding is not covered by any check.
      EXPECT_GE(i, original.size() - 48) << i;
      EXPECT_EQ(ScalarOf(*c->Read("b")), 2.0f);
    }
  }
}

TEST(SstableTest, RefusesWhatIsNotATable) {
  EXPECT_FALSE(ReadTable("", "t").ok());
  EXPECT_FALSE(ReadTable(std::string(48, '\0'), "t").ok());
}

// The SavedModel's "serve" graph with only `signature` kept.
tensorflow::MetaGraphDef ServeGraphWith(const fs::path& dir, const std::string& signature) {
  tensorflow::SavedModel sm;
  EXPECT_TRUE(sm.ParseFromString(ReadFile(dir / "saved_model.pb")));
  tensorflow::MetaGraphDef mg = sm.meta_graphs(0);
  auto* sigs = mg.mutable_signature_def();
  for (auto it = sigs->begin(); it != sigs->end();)
    it = it->first == signature ? std::next(it) : sigs->erase(it);
  return mg;
}

std::vector<float> RunPredict(const Model& model, const Tensor& x) {
  StatusOr<std::unique_ptr<Session>> session = Session::Create(model);
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  if (!session.ok()) return {};
  std::vector<NamedTensor> outputs;
  std::vector<NamedTensor> inputs{{"x", x}};
  Status s = (*session)->Run("serving_default", inputs, &outputs);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return {};
  auto v = outputs[0].tensor.data<float>();
  return {v.begin(), v.end()};
}

TEST(SavedModelImportTest, Tf1PredictSignatureGivesTfServingsAnswers) {
  StatusOr<Checkpoint> ckpt = Checkpoint::Open(kTf1 / "variables/variables");
  ASSERT_TRUE(ckpt.ok());
  StatusOr<Model> model = ImportMetaGraph(ServeGraphWith(kTf1, "serving_default"), &*ckpt);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Signature* sig = model->graph.FindSignature("serving_default");
  ASSERT_NE(sig, nullptr);
  EXPECT_EQ(sig->method_name, "tensorflow/serving/predict");
  ASSERT_EQ(sig->inputs.size(), 1u);
  EXPECT_EQ(sig->inputs[0].key, "x");
  EXPECT_EQ(sig->inputs[0].tensor, "x:0");  // TensorFlow's own names
  EXPECT_EQ(sig->outputs[0].tensor, "y:0");
  EXPECT_EQ(sig->inputs[0].shape, (Shape{-1, 1}));
  EXPECT_EQ(RunPredict(*model, Tensor::FromVector<float>(Shape{3, 1}, {1, 2, 5})),
            (std::vector<float>{2.5, 3, 4.5}));
}

TEST(SavedModelImportTest, Tf2FunctionsAreInlinedAndVariablesFoundThroughTheRestoreFunction) {
  StatusOr<Checkpoint> ckpt = Checkpoint::Open(kTf2 / "variables/variables");
  ASSERT_TRUE(ckpt.ok());
  StatusOr<Model> model = ImportMetaGraph(ServeGraphWith(kTf2, "serving_default"), &*ckpt);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->graph.FindSignature("serving_default")->inputs[0].tensor, "serving_default_x:0");
  // Declared [1]; TensorFlow lets callers batch along the first dimension, and so do we.
  EXPECT_EQ(RunPredict(*model, Tensor::FromVector<float>(Shape{3}, {1, 2, 5})),
            (std::vector<float>{2.5, 3, 4.5}));
}

// Serialized tf.Examples with float feature `key`, one value each.
Tensor SerializedExamples(const std::string& key, const std::vector<float>& values) {
  std::vector<std::string> bytes;
  for (float v : values) {
    tensorflow::Example e;
    (*e.mutable_features()->mutable_feature())[key].mutable_float_list()->add_value(v);
    bytes.push_back(e.SerializeAsString());
  }
  return Tensor::FromVector<std::string>(Shape{static_cast<int64_t>(values.size())}, bytes);
}

std::vector<float> RunSignature(const Session& session, const std::string& signature, const std::string& key,
                                const Tensor& input) {
  std::vector<NamedTensor> outputs;
  std::vector<NamedTensor> inputs{{key, input}};
  Status s = session.Run(signature, inputs, &outputs);
  EXPECT_TRUE(s.ok()) << signature << ": " << s.ToString();
  if (!s.ok()) return {};
  auto v = outputs[0].tensor.data<float>();
  return {v.begin(), v.end()};
}

TEST(SavedModelImportTest, Tf1ClassifyAndRegressSignaturesParseSerializedExamples) {
  StatusOr<Model> model = ReadSavedModel(kTf1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  StatusOr<std::unique_ptr<Session>> session = Session::Create(*model);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  const Session& s = **session;
  // y = 0.5 x + 2, y2 = 0.5 x + 3, y3 = 0.5 x2 + 3; x2 defaults to 0 when an example lacks it.
  EXPECT_EQ(RunSignature(s, "classify_x_to_y", "inputs", SerializedExamples("x", {1, 2})),
            (std::vector<float>{2.5, 3}));
  EXPECT_EQ(RunSignature(s, "regress_x_to_y", "inputs", SerializedExamples("x", {5})), (std::vector<float>{4.5}));
  EXPECT_EQ(RunSignature(s, "regress_x_to_y2", "inputs", SerializedExamples("x", {1})), (std::vector<float>{3.5}));
  EXPECT_EQ(RunSignature(s, "regress_x2_to_y3", "inputs", Tensor::FromVector<float>(Shape{1, 1}, {4})),
            (std::vector<float>{5}));
  // The signature that parses x needs it: an example without it is refused, naming it.
  std::vector<NamedTensor> outputs;
  std::vector<NamedTensor> no_x{{"inputs", SerializedExamples("x2", {1})}};
  Status missing = s.Run("classify_x_to_y", no_x, &outputs);
  EXPECT_NE(missing.message().find("feature 'x' (float32) is required"), std::string::npos) << missing.ToString();

  // TensorFlow does not hold a feed to its declared shape: x is declared [-1, 1], and TF
  // Serving's clients send [1, 2, 5].
  EXPECT_EQ(RunSignature(s, "serving_default", "x", Tensor::FromVector<float>(Shape{3}, {1, 2, 5})),
            (std::vector<float>{2.5, 3, 4.5}));

  // The SavedModel's own SignatureDefs are kept for metadata: TensorFlow's names, and the
  // unknown rank of the serialized examples.
  StatusOr<tensorflow::MetaGraphDef> defs = ImportedSignatureDefs(model->graph);
  ASSERT_TRUE(defs.ok()) << defs.status().ToString();
  const tensorflow::TensorInfo& in = defs->signature_def().at("classify_x_to_y").inputs().at("inputs");
  EXPECT_EQ(in.name(), "tf_example:0");
  EXPECT_TRUE(in.tensor_shape().unknown_rank());
  EXPECT_EQ(defs->signature_def().at("classify_x_to_y").method_name(), "tensorflow/serving/classify");
  EXPECT_EQ(defs->signature_def_size(), 5);
}

TEST(SavedModelImportTest, Tf2ParseExampleV2AndEveryOtherSavedModelOfTfServing) {
  StatusOr<Model> tf2 = ReadSavedModel(kTf2);
  ASSERT_TRUE(tf2.ok()) << tf2.status().ToString();
  StatusOr<std::unique_ptr<Session>> session = Session::Create(*tf2);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  EXPECT_EQ(RunSignature(**session, "classify_x_to_y", "inputs", SerializedExamples("x", {1, 2, 5})),
            (std::vector<float>{2.5, 3, 4.5}));
  EXPECT_EQ(RunSignature(**session, "regress_x_to_y2", "inputs", SerializedExamples("x", {1})),
            (std::vector<float>{3.5}));
  EXPECT_EQ(ImportedSignatureDefs(tf2->graph)->signature_def().count("__saved_model_init_op"), 1u);
  EXPECT_EQ(ImportedSignatureDefs(Model{}.graph).status().code(), StatusCode::kNotFound);

  struct Case {
    fs::path dir;
    float plus;
  };
  for (const Case& c : {Case{kData / "saved_model_half_plus_three/00000123", 3},
                        Case{kData / "saved_model_half_plus_two_2_versions/00000123", 2},
                        Case{kData / "saved_model_half_plus_two_2_versions/00000124", 2}}) {
    StatusOr<Model> model = ReadModelDir(c.dir);
    ASSERT_TRUE(model.ok()) << c.dir << ": " << model.status().ToString();
    StatusOr<std::unique_ptr<Session>> s = Session::Create(*model);
    ASSERT_TRUE(s.ok()) << c.dir << ": " << s.status().ToString();
    EXPECT_EQ(RunSignature(**s, "serving_default", "x", Tensor::FromVector<float>(Shape{3}, {1, 2, 5})),
              (std::vector<float>{0.5f + c.plus, 1 + c.plus, 2.5f + c.plus}))
        << c.dir;
  }
}

TEST(SavedModelImportTest, AnUnsupportedOpIsAnErrorNamingOpAndNode) {
  tensorflow::MetaGraphDef mg;
  auto* x = mg.mutable_graph_def()->add_node();
  x->set_name("x");
  x->set_op("Placeholder");
  auto* erf = mg.mutable_graph_def()->add_node();
  erf->set_name("model/erf");
  erf->set_op("Erf");
  erf->add_input("x");
  tensorflow::SignatureDef& sig = (*mg.mutable_signature_def())["serving_default"];
  tensorflow::TensorInfo in, out;
  in.set_name("x:0");
  in.set_dtype(tensorflow::DT_FLOAT);
  in.mutable_tensor_shape()->add_dim()->set_size(-1);
  out = in;
  out.set_name("model/erf:0");
  (*sig.mutable_inputs())["x"] = in;
  (*sig.mutable_outputs())["y"] = out;
  StatusOr<Model> model = ImportMetaGraph(mg, nullptr);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("node 'model/erf' (op Erf)"), std::string::npos)
      << model.status().ToString();
  EXPECT_NE(model.status().message().find("not supported"), std::string::npos);
  EXPECT_NE(model.status().message().find("signature 'serving_default'"), std::string::npos);

  // A call to a function the library lacks, and a signature naming a tensor that is not there.
  erf->set_op("StatefulPartitionedCall");
  (*erf->mutable_attr())["f"].mutable_func()->set_name("__inference_missing_1");
  EXPECT_NE(ImportMetaGraph(mg, nullptr).status().message().find("__inference_missing_1"), std::string::npos);
  erf->set_op("Identity");
  (*sig.mutable_outputs())["y"].set_name("nowhere:0");
  EXPECT_NE(ImportMetaGraph(mg, nullptr).status().message().find("nowhere"), std::string::npos);
}

TEST(SavedModelImportTest, ATruncatedSavedModelPbIsAnErrorNamingIt) {
  ScratchDir scratch;
  const fs::path dir = CopyTf1(scratch);
  const std::string pb = ReadFile(dir / "saved_model.pb");
  WriteFile(dir / "saved_model.pb", pb.substr(0, pb.size() / 3));
  Status s = ReadSavedModel(dir).status();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("saved_model.pb"), std::string::npos) << s.ToString();
  EXPECT_TRUE(IsSavedModelDir(dir));
  EXPECT_FALSE(IsSavedModelDir(scratch.path()));
}

}  // namespace
}  // namespace lockstep
