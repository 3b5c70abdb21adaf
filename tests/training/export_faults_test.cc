// model-train when its writes fail or it dies in the middle of one. RLIMIT_FSIZE stands in for
// a full disk: past the limit a write fails (EFBIG, when SIGXFSZ is ignored) or the process
// is killed on the spot (SIGXFSZ's default), at an exact byte, without root or a small
// filesystem. Whatever happens, the export directory holds only complete bundles and the
// checkpoint directory only complete checkpoints, and the next run carries on.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "runtime/bundle/bundle.h"
#include "tests/common/run_command.h"
#include "tests/common/scratch_dir.h"
#include "training/checkpoint.h"

namespace lockstep::training {
namespace {

namespace fs = std::filesystem;

class ExportFaultsTest : public ::testing::Test {
 protected:
  fs::path exports() const { return dir_.path() / "models"; }
  fs::path checkpoints() const { return dir_.path() / "checkpoints"; }

  // A config training a 64-128-10 MLP on the digits (its weights.bin is about 37 KiB), with
  // checkpoints every 5 steps when `with_checkpoints`.
  std::string WriteConfig(bool with_checkpoints) {
    const fs::path path = dir_.path() / "train.json";
    std::ofstream(path) << R"({"data": {"train": ")" << LOCKSTEP_SOURCE_DIR << R"(/examples/data/digits.csv"},
      "model": {"layers": [{"type": "dense", "units": 128, "activation": "relu"},
                           {"type": "dense", "units": 10, "activation": "softmax"}]},
      "epochs": 2, "batch_size": 64, "replicas": 1,)"
                        << (with_checkpoints ? R"("checkpoint": {"dir": ")" + checkpoints().string() +
                                                   R"(", "every_steps": 5, "keep": 2},)"
                                             : "")
                        << R"("export": {"dir": ")" << exports().string() << R"("}})";
    return path.string();
  }

  // model-train under `shell_prefix` (ulimit, trap), through bash.
  test::CommandResult Train(const std::string& config, const std::string& shell_prefix = "",
                            const std::string& flags = "") {
    return test::RunCommand("bash -c '" + shell_prefix + " exec " + MODEL_TRAIN_PATH + " --config " + config +
                            " " + flags + "'");
  }

  // Every entry of the export directory is a complete, valid version (the writer's
  // temporary directories are hidden and ignored by the server, but none may be left
  // visible), and the checkpoint directory's newest checkpoint reads (or there is none).
  void ExpectOnlyCompleteFiles() {
    if (fs::exists(exports())) {
      for (const auto& entry : fs::directory_iterator(exports())) {
        const std::string name = entry.path().filename().string();
        if (name.starts_with(".")) continue;
        ASSERT_TRUE(std::regex_match(name, std::regex("[1-9][0-9]*"))) << "stray entry " << entry.path();
        const StatusOr<Model> bundle = ReadBundle(entry.path());
        EXPECT_TRUE(bundle.ok()) << bundle.status().ToString();
      }
    }
    if (fs::exists(checkpoints())) {
      const StatusOr<Checkpoint> latest = ReadLatestCheckpoint(checkpoints().string());
      EXPECT_TRUE(latest.ok() || latest.status().code() == StatusCode::kNotFound)
          << latest.status().ToString();
    }
  }

  test::ScratchDir dir_;
};

// A write that fails in the middle of the export (as on a full disk) ends the run with the
// file and the reason, and leaves the versions that were there, and nothing else.
TEST_F(ExportFaultsTest, AnExportThatCannotBeWrittenLeavesNoPartialBundle) {
  const std::string config = WriteConfig(/*with_checkpoints=*/false);
  test::CommandResult r = Train(config);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(fs::exists(exports() / "1" / "weights.bin"));

  r = Train(config, "trap \"\" XFSZ; ulimit -f 24;");  // 24 KiB: model.pb fits, weights.bin does not
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("weights.bin"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("File too large"), std::string::npos) << r.output;
  std::vector<std::string> entries;
  for (const auto& entry : fs::directory_iterator(exports()))
    entries.push_back(entry.path().filename().string());
  EXPECT_EQ(entries, std::vector<std::string>{"1"}) << "the failed export's temporary directory is removed";
  ExpectOnlyCompleteFiles();
}

// Killed at the byte where a write crosses the limit, for limits that cut checkpoints and
// the export at different places: only complete files remain, and a run with --resume then
// finishes from the newest checkpoint and exports.
TEST_F(ExportFaultsTest, KilledInTheMiddleOfAWriteLeavesOnlyCompleteFiles) {
  const std::string config = WriteConfig(/*with_checkpoints=*/true);
  int killed = 0;
  for (int kib : {1, 4, 16, 24, 40, 64, 96, 160}) {
    SCOPED_TRACE("ulimit -f " + std::to_string(kib));
    const test::CommandResult r = Train(config, "ulimit -f " + std::to_string(kib) + ";", "--resume");
    if (r.exit_code != 0) ++killed;
    ExpectOnlyCompleteFiles();
  }
  EXPECT_GE(killed, 4) << "the limits should cut most runs short";
  const test::CommandResult r = Train(config, "", "--resume");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("exported " + exports().string() + "/"), std::string::npos) << r.output;
  ExpectOnlyCompleteFiles();
}

}  // namespace
}  // namespace lockstep::training
