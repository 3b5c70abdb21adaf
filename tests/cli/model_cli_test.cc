// model-cli end to end: the built binary, run as a user would.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/runtime/onnx_test_util.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int exit_code;
  std::string output;  // stdout and stderr together
};

Result RunCli(const std::string& args) {
  std::string command = std::string(MODEL_CLI_PATH) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class ModelCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("model_cli_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ModelCli, HalfPlusTwoEndToEnd) {
  std::string bundle = (dir_ / "h" / "1").string();
  Result made = RunCli("make-example half_plus_two --out " + bundle);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  Result run = RunCli("run --dir " + bundle + " --input 'x=[1.0,2.0,5.0]'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output, "{\"y\": [2.5, 3.0, 4.5]}\n");
}

TEST_F(ModelCli, ShowListsSignaturesAndMetadata) {
  std::string bundle = (dir_ / "1").string();
  ASSERT_EQ(RunCli("make-example half_plus_two --out " + bundle).exit_code, 0);
  Result show = RunCli("show --dir " + bundle);
  ASSERT_EQ(show.exit_code, 0) << show.output;
  EXPECT_NE(show.output.find("signature 'serving_default'"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("x: float32 [-1]"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("y: float32 [-1]"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("name: half_plus_two"), std::string::npos) << show.output;
  Result all = RunCli("show --all --dir " + bundle);
  EXPECT_NE(all.output.find("y = Add(mul, b)"), std::string::npos) << all.output;
  EXPECT_NE(all.output.find("weights (2,"), std::string::npos) << all.output;
}

TEST_F(ModelCli, VerifyAcceptsGoodAndRejectsCorruptBundles) {
  std::string bundle = (dir_ / "1").string();
  ASSERT_EQ(RunCli("make-example half_plus_two --out " + bundle).exit_code, 0);
  Result ok = RunCli("verify --dir " + bundle);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("OK"), std::string::npos);
  {
    std::fstream f(dir_ / "1" / "weights.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.put('\x7f');
  }
  Result bad = RunCli("verify --dir " + bundle);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("weights.bin"), std::string::npos) << bad.output;
  Result missing = RunCli("verify --dir " + (dir_ / "nothing").string());
  EXPECT_EQ(missing.exit_code, 1);
}

// The large example (for load benchmarks) is what it says: a sound bundle of over 100 MB.
TEST_F(ModelCli, LargeMatmulExampleIsASoundBundleOver100MB) {
  const std::string bundle = (dir_ / "large").string();
  ASSERT_EQ(RunCli("make-example large_matmul --out " + bundle).exit_code, 0);
  EXPECT_EQ(RunCli("verify --dir " + bundle).exit_code, 0);
  uintmax_t bytes = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(bundle)) {
    if (entry.is_regular_file()) bytes += entry.file_size();
  }
  EXPECT_GE(bytes, uintmax_t{100} << 20);
}

// The larger MLP (for batching benchmarks) runs: a row of 784 features gives 10 probabilities
// summing to 1, and its class.
TEST_F(ModelCli, MlpExampleAnswersWithProbabilitiesAndAClass) {
  const std::string bundle = (dir_ / "mlp").string();
  ASSERT_EQ(RunCli("make-example mlp_784_1024_1024_10 --out " + bundle).exit_code, 0);
  EXPECT_EQ(RunCli("verify --dir " + bundle).exit_code, 0);
  std::string row = "[";
  for (int i = 0; i < 784; ++i) row += (i ? "," : "") + std::to_string((i % 17) / 17.0);
  row += "]";
  const Result run = RunCli("run --dir " + bundle + " --input 'x=[" + row + "]'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json answer = nlohmann::json::parse(run.output);
  ASSERT_EQ(answer["probabilities"].size(), 1u) << run.output;
  ASSERT_EQ(answer["probabilities"][0].size(), 10u) << run.output;
  double sum = 0;
  for (const auto& p : answer["probabilities"][0]) sum += p.get<double>();
  EXPECT_NEAR(sum, 1.0, 1e-5);
  const int64_t cls = answer["classes"][0].get<int64_t>();
  EXPECT_GE(cls, 0);
  EXPECT_LT(cls, 10);
}

TEST_F(ModelCli, BadUsageAndBadInputsExplainThemselves) {
  std::string bundle = (dir_ / "1").string();
  ASSERT_EQ(RunCli("make-example half_plus_two --out " + bundle).exit_code, 0);
  EXPECT_EQ(RunCli("").exit_code, 2);
  EXPECT_EQ(RunCli("frobnicate").exit_code, 2);
  EXPECT_EQ(RunCli("show --bogus x").exit_code, 2);
  Result unknown_example = RunCli("make-example nope --out " + (dir_ / "2").string());
  EXPECT_EQ(unknown_example.exit_code, 1);
  EXPECT_NE(unknown_example.output.find("half_plus_two"), std::string::npos);
  Result bad_json = RunCli("run --dir " + bundle + " --input 'x=[1,'");
  EXPECT_EQ(bad_json.exit_code, 1);
  EXPECT_NE(bad_json.output.find("not valid JSON"), std::string::npos) << bad_json.output;
  Result bad_key = RunCli("run --dir " + bundle + " --input 'z=[1]'");
  EXPECT_NE(bad_key.output.find("no input 'z'"), std::string::npos) << bad_key.output;
  Result bad_shape = RunCli("run --dir " + bundle + " --input 'x=[[1],[2]]'");
  EXPECT_EQ(bad_shape.exit_code, 1);
  EXPECT_NE(bad_shape.output.find("shape [-1]"), std::string::npos) << bad_shape.output;
  Result ragged = RunCli("run --dir " + bundle + " --input 'x=[[1],[2,3]]'");
  EXPECT_NE(ragged.output.find("not rectangular"), std::string::npos) << ragged.output;
  Result no_sig = RunCli("run --dir " + bundle + " --signature other --input 'x=[1]'");
  EXPECT_NE(no_sig.output.find("serving_default"), std::string::npos) << no_sig.output;
  // Writing over an existing bundle is refused rather than destroying it.
  EXPECT_EQ(RunCli("make-example half_plus_two --out " + bundle).exit_code, 1);
}

TEST_F(ModelCli, InputFromFile) {
  std::string bundle = (dir_ / "1").string();
  ASSERT_EQ(RunCli("make-example half_plus_two --out " + bundle).exit_code, 0);
  std::ofstream(dir_ / "x.json") << "[4, -2]";
  Result run = RunCli("run --dir " + bundle + " --input x=@" + (dir_ / "x.json").string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output, "{\"y\": [4.0, 1.0]}\n");
}

TEST_F(ModelCli, HostileJsonIsRefusedNotACrash) {
  std::string bundle = (dir_ / "1").string();
  ASSERT_EQ(RunCli("make-example half_plus_two --out " + bundle).exit_code, 0);
  std::ofstream(dir_ / "deep.json") << std::string(200000, '[') << std::string(200000, ']');
  Result deep = RunCli("run --dir " + bundle + " --input x=@" + (dir_ / "deep.json").string());
  EXPECT_EQ(deep.exit_code, 1) << deep.output;
  EXPECT_NE(deep.output.find("deeper than"), std::string::npos) << deep.output;
  std::ofstream(dir_ / "objects.json") << "[" << std::string(100000, '{') << "]";
  EXPECT_EQ(RunCli("run --dir " + bundle + " --input x=@" + (dir_ / "objects.json").string()).exit_code, 1);
  Result huge = RunCli("run --dir " + bundle + " --input 'x=[1e300]'");
  EXPECT_EQ(huge.exit_code, 1);
  EXPECT_NE(huge.output.find("to float32: out of range"), std::string::npos) << huge.output;
  Result text = RunCli("run --dir " + bundle + " --input 'x=[\"a\"]'");
  EXPECT_NE(text.output.find("expected a number, got a string"), std::string::npos) << text.output;
}

TEST_F(ModelCli, ThreadsFlag) {
  std::string bundle = (dir_ / "1").string();
  ASSERT_EQ(RunCli("make-example half_plus_two --out " + bundle).exit_code, 0);
  Result one = RunCli("run --threads 1 --dir " + bundle + " --input 'x=[0]'");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_EQ(one.output, "{\"y\": [2.0]}\n");
  EXPECT_EQ(RunCli("run --threads 0 --dir " + bundle + " --input 'x=[0]'").exit_code, 2);
  EXPECT_EQ(RunCli("run --threads two --dir " + bundle + " --input 'x=[0]'").exit_code, 2);
}

// A TensorFlow SavedModel (TF Serving's TF1 half_plus_two, unchanged) is verified, shown and
// run as it is, and imported as a bundle that verifies, keeps its assets and gives the same
// answers.
TEST_F(ModelCli, SavedModelsVerifyRunAndImportAsBundles) {
  const std::string saved_model =
      (fs::path(LOCKSTEP_SOURCE_DIR) / "tests/data/tf_saved_models/saved_model_half_plus_two_cpu/00000123").string();
  Result verify = RunCli("verify --dir " + saved_model);
  ASSERT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_NE(verify.output.find("valid TensorFlow SavedModel"), std::string::npos) << verify.output;
  EXPECT_NE(verify.output.find("classify_x_to_y"), std::string::npos) << verify.output;
  Result run = RunCli("run --dir " + saved_model + " --input 'x=[1.0,2.0,5.0]'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output, "{\"y\": [2.5, 3.0, 4.5]}\n");

  const std::string bundle = (dir_ / "imported" / "1").string();
  Result imported = RunCli("import --saved_model " + saved_model + " --out " + bundle);
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_FALSE(fs::exists(fs::path(bundle) / "saved_model.pb"));
  EXPECT_TRUE(fs::exists(fs::path(bundle) / "assets" / "foo.txt"));
  verify = RunCli("verify --dir " + bundle);
  ASSERT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_NE(verify.output.find("valid bundle"), std::string::npos) << verify.output;
  run = RunCli("run --dir " + bundle + " --input 'x=[1.0,2.0,5.0]'");
  EXPECT_EQ(run.output, "{\"y\": [2.5, 3.0, 4.5]}\n");
  Result show = RunCli("show --dir " + bundle);
  EXPECT_NE(show.output.find("regress_x_to_y2"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("tensorflow_signature_defs: classify_x_to_y regress_x2_to_y3 regress_x_to_y regress_x_to_y2 serving_default"), std::string::npos)
      << show.output;
  EXPECT_NE(show.output.find("x: float32 [-1,1] (any shape)  <- x:0"), std::string::npos) << show.output;

  // An existing destination needs --overwrite; a directory that is not a SavedModel is named.
  EXPECT_EQ(RunCli("import --saved_model " + saved_model + " --out " + bundle).exit_code, 1);
  EXPECT_EQ(RunCli("import --saved_model " + saved_model + " --out " + bundle + " --overwrite").exit_code, 0);
  Result not_saved_model = RunCli("import --saved_model " + dir_.string() + " --out " + (dir_ / "x").string());
  EXPECT_EQ(not_saved_model.exit_code, 1);
  EXPECT_NE(not_saved_model.output.find("not a SavedModel"), std::string::npos) << not_saved_model.output;
  EXPECT_EQ(RunCli("import --out " + bundle).exit_code, 2);
}

}  // namespace

namespace {

// An ONNX model as a user brings it: verify, show and run it as it is, then import it as a
// bundle that answers the same.
TEST_F(ModelCli, OnnxModelIsVerifiedShownRunAndImported) {
  const fs::path version = dir_ / "mlp" / "1";
  lockstep::testing_onnx::MakeMlp().Write(version);
  const Result verify = RunCli("verify --dir " + version.string());
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_NE(verify.output.find("valid ONNX model"), std::string::npos) << verify.output;
  const Result show = RunCli("show --dir " + version.string());
  EXPECT_EQ(show.exit_code, 0) << show.output;
  EXPECT_NE(show.output.find("probabilities"), std::string::npos) << show.output;
  const Result run = RunCli("run --dir " + version.string() + " --input 'x=[[1,2,3,4]]'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto answer = nlohmann::json::parse(run.output)["probabilities"][0];
  const std::vector<double> want = lockstep::testing_onnx::MlpReference({1, 2, 3, 4});
  EXPECT_NEAR(answer[0].get<double>(), want[0], 1e-6) << run.output;
  EXPECT_NEAR(answer[1].get<double>(), want[1], 1e-6) << run.output;

  const fs::path bundle = dir_ / "bundle";
  const Result imported = RunCli("import --onnx " + (version / "model.onnx").string() + " --out " + bundle.string());
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_EQ(RunCli("verify --dir " + bundle.string()).exit_code, 0);
  EXPECT_EQ(RunCli("run --dir " + bundle.string() + " --input 'x=[[1,2,3,4]]'").output, run.output);

  // Both sources at once, or neither, is a usage error; a broken file names itself.
  EXPECT_EQ(RunCli("import --onnx a --saved_model b --out c").exit_code, 2);
  std::ofstream(version / "model.onnx") << "garbage";
  const Result broken = RunCli("verify --dir " + version.string());
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_NE(broken.output.find("model.onnx"), std::string::npos) << broken.output;
}

// export-onnx: a bundle out as an ONNX model that model-cli (the importer) runs to the same
// answers; an existing file kept without --overwrite; a bad signature or directory named.
TEST_F(ModelCli, ExportOnnxWritesAModelThatAnswersAsTheBundle) {
  const std::string bundle = (dir_ / "h" / "1").string(), onnx = (dir_ / "h.onnx").string();
  ASSERT_EQ(RunCli("make-example half_plus_two --out " + bundle).exit_code, 0);
  Result exported = RunCli("export-onnx --dir " + bundle + " --out " + onnx);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_NE(exported.output.find("opset 17"), std::string::npos) << exported.output;
  fs::create_directories(dir_ / "o" / "1");
  fs::copy_file(onnx, dir_ / "o" / "1" / "model.onnx");
  Result run = RunCli("run --dir " + (dir_ / "o" / "1").string() + " --input 'x=[1.0,2.0,5.0]'");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output, "{\"y\": [2.5, 3.0, 4.5]}\n");

  Result again = RunCli("export-onnx --dir " + bundle + " --out " + onnx);
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.output.find("--overwrite"), std::string::npos) << again.output;
  EXPECT_EQ(RunCli("export-onnx --dir " + bundle + " --out " + onnx + " --overwrite").exit_code, 0);

  Result signature = RunCli("export-onnx --dir " + bundle + " --out " + onnx + " --overwrite --signature nope");
  EXPECT_EQ(signature.exit_code, 1);
  EXPECT_NE(signature.output.find("no signature 'nope'"), std::string::npos) << signature.output;
  Result missing = RunCli("export-onnx --dir " + (dir_ / "none").string() + " --out " + onnx + " --overwrite");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("none"), std::string::npos) << missing.output;
  EXPECT_EQ(RunCli("export-onnx --dir " + bundle).exit_code, 2);
}

}  // namespace
