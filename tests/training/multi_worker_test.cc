// Multi-worker training over MPI, as a user runs it: mpirun -np 2 model-train on localhost.
// The two workers hold bit-identical weights after every epoch (each logs a CRC-32C of its
// weights, checked here from outside as well as by the workers themselves), and the result is
// exactly that of one process with two replicas: the same shards of each global batch, the
// same dropout streams, and the gradients summed in the same order (worker by worker, replica
// by replica). Against one process with one replica, whose sums go in another order, the test
// accuracy agrees within one percentage point.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/run_command.h"
#include "training/checkpoint.h"

namespace lockstep::training {
namespace {

namespace fs = std::filesystem;

#ifdef LOCKSTEP_MPIEXEC
using Result = test::CommandResult;
using test::RunCommand;

std::string ReadBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

double TestAccuracy(const std::string& output) {
  std::smatch m;
  const std::regex re("test_accuracy=([0-9.]+) test_loss");
  return std::regex_search(output, m, re) ? std::stod(m[1]) : -1;
}

// The start of a command line: in the source tree (the configs' data paths are relative to it),
// with what mpirun needs here (as root, more ranks than cores) and what sanitizer builds need
// (OpenMPI's own leaks not counted).
std::string MpiEnv() {
  return "cd " + std::string(LOCKSTEP_SOURCE_DIR) +
         " && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
         "ASAN_OPTIONS=detect_leaks=0 ";
}

// `train` on two workers of one replica, exported to dir/workers, and in one process of two
// replicas, exported to dir/one.
struct TwoWays {
  Result workers, one;
};
TwoWays TrainBothWays(const std::string& train, const fs::path& dir) {
  TwoWays r{RunCommand(MpiEnv() + LOCKSTEP_MPIEXEC + " -np 2 " + train + " --replicas 1 --export_dir " +
                       (dir / "workers").string()),
            RunCommand(MpiEnv() + train + " --replicas 2 --export_dir " + (dir / "one").string())};
  EXPECT_EQ(r.workers.exit_code, 0) << r.workers.output;
  EXPECT_EQ(r.one.exit_code, 0) << r.one.output;
  return r;
}

TEST(MultiWorkerTest, TwoWorkersStayIdenticalAndMatchOneProcessWithTwoReplicas) {
  const fs::path dir = fs::temp_directory_path() / ("lockstep_mpi_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string train = std::string(MODEL_TRAIN_PATH) + " --config " + LOCKSTEP_SOURCE_DIR +
                            "/config/train/digits.json --epochs 5";
  // mpirun refuses root unless told; sanitizer builds must not count OpenMPI's own leaks.
  const std::string env = MpiEnv();
  const Result workers = RunCommand(env + LOCKSTEP_MPIEXEC + " -np 2 " + train +
                                    " --replicas 1 --export_dir " + (dir / "workers").string());
  ASSERT_EQ(workers.exit_code, 0) << workers.output;
  EXPECT_NE(workers.output.find("workers=\"mpi rank 1 of 2\""), std::string::npos) << workers.output;

  // Every epoch, both ranks report the same weights.
  std::map<std::string, std::map<std::string, std::string>> crc;  // epoch -> rank -> crc
  const std::regex line(
      "event=workers_agree epoch=([0-9]+) rank=([0-9]+) workers=2 weights_crc32c=([0-9a-f]+)");
  for (std::sregex_iterator it(workers.output.begin(), workers.output.end(), line), end; it != end; ++it) {
    crc[(*it)[1]][(*it)[2]] = (*it)[3];
  }
  ASSERT_EQ(crc.size(), 5u) << workers.output;
  for (const auto& [epoch, by_rank] : crc) {
    ASSERT_EQ(by_rank.size(), 2u) << "epoch " << epoch;
    EXPECT_EQ(by_rank.at("0"), by_rank.at("1")) << "epoch " << epoch;
  }

  const Result replicas =
      RunCommand(env + train + " --replicas 2 --export_dir " + (dir / "replicas").string());
  ASSERT_EQ(replicas.exit_code, 0) << replicas.output;
  EXPECT_EQ(ReadBytes(dir / "workers/1/weights.bin"), ReadBytes(dir / "replicas/1/weights.bin"))
      << "two workers of one replica differ from one process of two";

  const Result single = RunCommand(env + train + " --replicas 1 --export_dir " + (dir / "single").string());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_NEAR(TestAccuracy(workers.output), TestAccuracy(single.output), 0.01);
  EXPECT_GT(TestAccuracy(workers.output), 0.9);
  fs::remove_all(dir);
}
// batch_norm across workers: each batch's statistics are summed over every worker's rows in the
// batch's order. Two workers of one replica export the bits of one process of two. With two
// replicas each, the gradients' sums associate differently from one process of four (worker by
// worker), but the statistics do not: after one step on the whole training set, the moving
// averages in the checkpoint are the same bits. A batch that would leave a worker without rows
// is refused before training, naming the remedy.
TEST(MultiWorkerTest, BatchNormStatisticsSpanTheWorkers) {
  const fs::path dir = fs::temp_directory_path() / ("lockstep_mpi_bn_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string train = std::string(MODEL_TRAIN_PATH) + " --config " + LOCKSTEP_SOURCE_DIR +
                            "/config/train/digits_resnet.json --epochs 2";
  const std::string env = MpiEnv();
  const auto [workers, one] = TrainBothWays(train, dir);
  ASSERT_EQ(workers.exit_code + one.exit_code, 0);
  EXPECT_TRUE(ReadBytes(dir / "workers/1/weights.bin") == ReadBytes(dir / "one/1/weights.bin"))
      << "two workers of one replica differ from one process of two";
  EXPECT_GT(TestAccuracy(workers.output), 0.8) << workers.output;

  // One step of the whole training set (1259 rows), checkpointed.
  std::string config = ReadBytes(fs::path(LOCKSTEP_SOURCE_DIR) / "config/train/digits_resnet.json");
  auto one_step = [&](const std::string& name, const std::string& launcher, int replicas) {
    std::string c = config;
    c.insert(1, R"("checkpoint": {"dir": ")" + (dir / name).string() + R"("}, "drop_remainder": true,)");
    std::ofstream(dir / (name + ".json")) << c;
    const Result r = RunCommand(env + launcher + std::string(MODEL_TRAIN_PATH) + " --config " +
                                (dir / (name + ".json")).string() + " --epochs 1 --batch_size 1259 --replicas " +
                                std::to_string(replicas));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    StatusOr<Checkpoint> c1 = ReadLatestCheckpoint((dir / name).string());
    EXPECT_TRUE(c1.ok()) << c1.status().ToString();
    return c1.ok() ? c1.value() : Checkpoint{};
  };
  const Checkpoint two_by_two = one_step("two_by_two", std::string(LOCKSTEP_MPIEXEC) + " -np 2 ", 2);
  const Checkpoint four = one_step("four", "", 4);
  int compared = 0;
  for (const auto& [name, values] : four.weights) {
    if (name.find("/moving_") == std::string::npos) continue;
    ++compared;
    ASSERT_TRUE(two_by_two.weights.count(name)) << name;
    EXPECT_TRUE(two_by_two.weights.at(name) == values) << name;
  }
  EXPECT_EQ(compared, 14);  // seven batch_norm layers, a mean and a variance each

  const Result odd = RunCommand(env + LOCKSTEP_MPIEXEC + " -np 2 " + train + " --batch_size 2 --replicas 1");
  EXPECT_NE(odd.exit_code, 0);
  EXPECT_NE(odd.output.find("leaves a worker with none"), std::string::npos) << odd.output;
  EXPECT_NE(odd.output.find("drop_remainder"), std::string::npos) << odd.output;
  fs::remove_all(dir);
}

// Streaming: each worker opens only its own shards' files (four part files, two each), and the
// run is the bits of one process that owns both shards and trains them on two replicas.
TEST(MultiWorkerTest, StreamingWorkersReadOnlyTheirShards) {
  const fs::path dir = fs::temp_directory_path() / ("lockstep_mpi_stream_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ifstream digits(std::string(LOCKSTEP_SOURCE_DIR) + "/examples/data/digits.csv");
  std::string header, line;
  std::getline(digits, header);
  std::vector<std::string> rows;
  while (std::getline(digits, line)) rows.push_back(line);
  auto write = [&](const std::string& name, size_t begin, size_t end) {
    std::ofstream out(dir / name);
    out << header << "\n";
    for (size_t i = begin; i < end; ++i) out << rows[i] << "\n";
  };
  for (size_t p = 0; p < 4; ++p) write("part-" + std::to_string(p) + ".csv", p * 350, (p + 1) * 350);
  write("test.csv", 1400, rows.size());
  auto config = [&](const std::string& name, const std::string& extra) {
    std::ofstream(dir / name) << R"({"data": {"train": ")" << (dir / "part-*.csv").string() << R"(", "test": ")"
                              << (dir / "test.csv").string() << R"(", "mode": "streaming", "interleave": 2)"
                              << extra << R"(}, "model": {"layers": [{"type": "dense", "units": 64, "activation": "relu"},
        {"type": "dense", "units": 10, "activation": "softmax"}]}, "epochs": 6, "optimizer": {"learning_rate": 0.005}})";
    return (dir / name).string();
  };
  const std::string env = MpiEnv();
  const Result workers = RunCommand(env + LOCKSTEP_MPIEXEC + " -np 2 " + MODEL_TRAIN_PATH + " --config " +
                                    config("workers.json", "") + " --replicas 1 --export_dir " +
                                    (dir / "workers").string());
  ASSERT_EQ(workers.exit_code, 0) << workers.output;
  for (const char* rank_shards : {"worker_shards=[0,1) files_read=2", "worker_shards=[1,2) files_read=2"}) {
    EXPECT_NE(workers.output.find(rank_shards), std::string::npos) << workers.output;
  }
  const Result one = RunCommand(env + MODEL_TRAIN_PATH + " --config " + config("one.json", R"(, "shards": 2)") +
                                " --replicas 2 --export_dir " + (dir / "one").string());
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("worker_shards=[0,2) files_read=4"), std::string::npos) << one.output;
  EXPECT_EQ(ReadBytes(dir / "workers/1/weights.bin"), ReadBytes(dir / "one/1/weights.bin"))
      << "two streaming workers differ from one process owning both shards";
  EXPECT_GT(TestAccuracy(workers.output), 0.9);
  fs::remove_all(dir);
}

// Regression across workers: the diabetes config on two workers exports the bits of one
// process with two replicas, and every epoch's training MSE and MAE (summed across the
// workers) are the ones that process reports.
TEST(MultiWorkerTest, RegressionWorkersReportTheOneProcessMetrics) {
  const fs::path dir = fs::temp_directory_path() / ("lockstep_mpi_regression_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string train = std::string(MODEL_TRAIN_PATH) + " --config " + LOCKSTEP_SOURCE_DIR +
                            "/config/train/diabetes.json --epochs 15";
  const auto [workers, one] = TrainBothWays(train, dir);
  ASSERT_EQ(workers.exit_code + one.exit_code, 0);
  EXPECT_EQ(ReadBytes(dir / "workers/1/weights.bin"), ReadBytes(dir / "one/1/weights.bin"));
  auto metrics = [](const std::string& output) {
    std::vector<std::string> found;
    const std::regex re("event=epoch (epoch=[0-9]+/15 loss=[0-9.]+ mse=[0-9.]+ mae=[0-9.]+)");
    for (std::sregex_iterator it(output.begin(), output.end(), re), end; it != end; ++it) found.push_back((*it)[1]);
    return found;
  };
  EXPECT_EQ(metrics(workers.output).size(), 15u) << workers.output;
  EXPECT_EQ(metrics(workers.output), metrics(one.output));
  fs::remove_all(dir);
}
#else
TEST(MultiWorkerTest, RegressionWorkersReportTheOneProcessMetrics) {
  GTEST_SKIP() << "model-train was built without MPI (scripts/install-deps installs libopenmpi-dev)";
}
TEST(MultiWorkerTest, StreamingWorkersReadOnlyTheirShards) {
  GTEST_SKIP() << "model-train was built without MPI (scripts/install-deps installs libopenmpi-dev)";
}
TEST(MultiWorkerTest, TwoWorkersStayIdenticalAndMatchOneProcessWithTwoReplicas) {
  GTEST_SKIP() << "model-train was built without MPI (scripts/install-deps installs libopenmpi-dev)";
}
#endif

}  // namespace
}  // namespace lockstep::training
