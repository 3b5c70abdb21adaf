// model-train: trains the model a config describes and exports it as a bundle that
// model-server serves. See training/CONFIG.md for the config and `model-train --help`.
#include <spdlog/spdlog.h>

#include <bit>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "model_store/s3/s3_settings.h"
#include "model_store/version_storage.h"
#include "runtime/cli/flags.h"
#include "training/config.h"
#include "training/trainer.h"

namespace {

constexpr const char* kUsage = R"(usage: model-train --config FILE [flags]

Trains the model FILE describes (JSON; schema in training/CONFIG.md) and exports it as a
bundle into <export_dir>/<version>/, version = the highest there + 1. Flags override the
config's settings:

  --config FILE          the training config (required)
  --export_dir DIR       export.dir: where the bundle goes; an s3://bucket/prefix/model URL
                         writes it to an S3 repository (the bundle's objects first, its
                         manifest last), signed with the AWS_* / S3_* variables model-server
                         reads (server/README.md)
  --epochs N             epochs
  --batch_size N         batch_size
  --learning_rate X      optimizer.learning_rate
  --seed N               seed (initialisers, shuffling, dropout)
  --replicas N           replicas: data-parallel replicas, each a thread (default: one
                         per usable core)
  --precision P          precision: float32 or bfloat16 (mixed precision)
  --logdir DIR           TensorBoard event files
  --model_name NAME      export.model_name (default: the config file's name)
  --predictions_out FILE write the test rows and the exported model's probabilities for
                         them (JSON; floats as their IEEE-754 bit patterns, so nothing is
                         lost): what model-server must answer for those rows, bit for bit
  --resume               continue from the newest checkpoint in checkpoint.dir (from the
                         start when there is none), as if the run had never stopped
  --help                 this text

Each epoch logs one line: loss, accuracy, validation loss and accuracy, samples/s, elapsed
time and ETA. At the end: the test accuracy and where the bundle went.

Several processes: mpirun -np N model-train --config FILE ... runs N workers (each with its
own replicas) on one global batch; rank 0 writes checkpoints, logs and the export.
)";

int Fail(const std::string& message, int code = 1) {
  std::cerr << "model-train: " << message << "\n";
  return code;
}

// An s3:// export is trained into a local directory and published from there
// (version_storage.h), as model-cli publish would.
struct S3Export {
  std::string url;
  lockstep::StorageOptions storage;
  std::filesystem::path staging;  // private to this run (mkdtemp, mode 0700)
  bool keep_staging = false;       // a failed publish keeps the trained bundle for a retry
  ~S3Export() {
    std::error_code ec;
    if (!staging.empty() && !keep_staging) std::filesystem::remove_all(staging, ec);
  }
};

// Checked before training: a wrong URL, a refused key or an unreachable server fails now, not
// after the epochs.
lockstep::Status PrepareS3Export(const std::string& url, S3Export& out) {
  using namespace lockstep;
  LS_RETURN_IF_ERROR(ParseS3Url(url).status());
  out.url = url;
  StatusOr<S3Settings> settings = S3SettingsFromEnvironment();
  if (!settings.ok()) return settings.status();
  out.storage.s3 = *settings;
  LS_RETURN_IF_ERROR(ListStoredVersions(url, out.storage).status());
  std::string pattern = (std::filesystem::temp_directory_path() / "lockstep-export-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) return FailedPrecondition("cannot make a staging directory " + pattern);
  out.staging = pattern;
  return Status::Ok();
}

bool ParseInt(const std::string& text, int64_t min, int64_t& out) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || v < min) return false;
  out = v;
  return true;
}

// {"features": [[bits...]...], "probabilities": [[bits...]...]}, each float as its uint32 bits.
lockstep::Status WritePredictions(const std::string& path, const lockstep::training::TrainReport& report) {
  nlohmann::json features = nlohmann::json::array(), probabilities = nlohmann::json::array();
  const auto f = static_cast<size_t>(report.num_features), c = static_cast<size_t>(report.num_classes);
  auto bits = [](const float* begin, size_t n) {
    nlohmann::json row = nlohmann::json::array();
    for (size_t i = 0; i < n; ++i) row.push_back(std::bit_cast<uint32_t>(begin[i]));
    return row;
  };
  for (size_t r = 0; r * f < report.test_features.size(); ++r) {
    features.push_back(bits(report.test_features.data() + r * f, f));
    probabilities.push_back(bits(report.test_probabilities.data() + r * c, c));
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << nlohmann::json{{"features", features}, {report.regression ? "outputs" : "probabilities", probabilities}}.dump()
      << "\n";
  if (!out) return lockstep::DataLoss("cannot write '" + path + "'");
  return lockstep::Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace lockstep;
  using namespace lockstep::training;
  // First: under mpirun, MPI_Init must see the arguments before anything else does.
  StatusOr<std::unique_ptr<Workers>> started = StartWorkers(&argc, &argv);
  if (!started.ok()) return Fail(started.status().message());
  std::unique_ptr<Workers> workers = std::move(started).value();
  StatusOr<Flags> flags = ParseFlags(argc - 1, argv + 1,
                                     {"config", "export_dir", "epochs", "batch_size", "learning_rate", "seed",
                                      "replicas", "precision", "logdir", "model_name", "predictions_out"},
                                     {"help", "resume"});
  if (!flags.ok()) return Fail(flags.status().message() + " (see --help)", 2);
  if (flags->Has("help")) {
    std::cout << kUsage;
    return 0;
  }
  if (!flags->positional.empty()) return Fail("unexpected argument '" + flags->positional.front() + "'", 2);
  if (!flags->Has("config")) return Fail("--config is required (see --help)", 2);
  const std::string config_path = flags->Get("config");
  StatusOr<TrainConfig> loaded = LoadTrainConfig(config_path);
  if (!loaded.ok()) return Fail(loaded.status().message(), 2);
  TrainConfig config = std::move(loaded).value();

  if (flags->Has("export_dir")) config.export_.dir = flags->Get("export_dir");
  if (flags->Has("logdir")) config.logdir = flags->Get("logdir");
  if (flags->Has("model_name")) config.export_.model_name = flags->Get("model_name");
  int64_t n = 0;
  if (flags->Has("epochs")) {
    if (!ParseInt(flags->Get("epochs"), 1, n)) return Fail("--epochs must be an integer >= 1", 2);
    config.epochs = n;
  }
  if (flags->Has("batch_size")) {
    if (!ParseInt(flags->Get("batch_size"), 1, n)) return Fail("--batch_size must be an integer >= 1", 2);
    config.batch_size = n;
  }
  if (flags->Has("seed")) {
    if (!ParseInt(flags->Get("seed"), 0, n)) return Fail("--seed must be a non-negative integer", 2);
    config.seed = static_cast<uint64_t>(n);
  }
  if (flags->Has("replicas")) {
    if (!ParseInt(flags->Get("replicas"), 1, n) || n > 256) return Fail("--replicas must be an integer from 1 to 256", 2);
    config.replicas = static_cast<int>(n);
  }
  if (flags->Has("precision")) {
    config.precision = flags->Get("precision");
    if (config.precision != "float32" && config.precision != "bfloat16") {
      return Fail("--precision must be float32 or bfloat16, got '" + config.precision + "'", 2);
    }
  }
  if (flags->Has("learning_rate")) {
    char* end = nullptr;
    const std::string text = flags->Get("learning_rate");
    const double lr = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || !(lr > 0))
      return Fail("--learning_rate must be a number > 0", 2);
    config.optimizer.learning_rate = lr;
  }
  const std::string model_name = config.export_.model_name.empty()
                                     ? std::filesystem::path(config_path).stem().string()
                                     : config.export_.model_name;

  S3Export s3_export;
  if (IsS3Url(config.export_.dir) && workers->rank() == 0) {
    if (Status s = PrepareS3Export(config.export_.dir, s3_export); !s.ok()) {
      Fail("--export_dir / export.dir: " + s.message(), 2);
      workers->Abort(2);  // the other workers would wait for this one forever
      return 2;
    }
    config.export_.dir = s3_export.staging.string();
  }

  const std::string predictions_out = flags->Get("predictions_out");
  TrainOptions options;
  options.keep_test_predictions = !predictions_out.empty();
  options.resume = flags->Has("resume");
  options.workers = workers.get();
  StatusOr<TrainReport> report = Train(config, model_name, options);
  if (!report.ok()) {
    Fail((workers->size() > 1 ? "rank " + std::to_string(workers->rank()) + ": " : std::string()) +
         report.status().message());
    workers->Abort(1);  // the other workers would wait for this one forever
    return 1;
  }
  if (workers->rank() != 0) return 0;
  if (!predictions_out.empty()) {
    if (!report->has_test) return Fail("--predictions_out: the config holds out no test rows");
    if (Status s = WritePredictions(predictions_out, *report); !s.ok()) return Fail(s.message());
  }
  if (report->has_test && report->regression) {
    std::cout << "test_mse=" << report->test_mse << " test_mae=" << report->test_mae
              << " test_loss=" << report->test_loss << "\n";
  } else if (report->has_test) {
    std::cout << "test_accuracy=" << report->test_accuracy << " test_loss=" << report->test_loss << "\n";
  }
  if (report->has_validation && report->regression) {
    std::cout << "validation_mse=" << report->validation_mse << " validation_mae=" << report->validation_mae << "\n";
  } else if (report->has_validation) {
    std::cout << "validation_accuracy=" << report->validation_accuracy << "\n";
  }
  if (!report->export_path.empty() && !s3_export.url.empty()) {
    StatusOr<int64_t> version = PublishVersion(report->export_path, s3_export.url, 0, s3_export.storage);
    if (!version.ok()) {
      s3_export.keep_staging = true;
      return Fail("publishing to " + s3_export.url + ": " + version.status().message() + " (the bundle is kept in " +
                  report->export_path + ": model-cli publish --dir " + report->export_path + " --to " + s3_export.url +
                  " tries again)");
    }
    report->export_path = ParseS3Url(s3_export.url)->Url() + std::to_string(*version);
  }
  if (!report->export_path.empty()) std::cout << "exported " << report->export_path << "\n";
  return 0;
}
