#include "training/trainer.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <sched.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "runtime/bundle/bundle.h"
#include "runtime/crc32c.h"
#include "runtime/session.h"
#include "training/checkpoint.h"
#include "training/data/dataset.h"
#include "training/data/feature_stats.h"
#include "training/data/pipeline.h"
#include "training/data/streaming_pipeline.h"
#include "training/evaluation.h"
#include "training/data/row_decoder.h"
#include "training/event_writer.h"
#include "training/initializers.h"
#include "training/mirrored_step.h"
#include "training/model_graph.h"
#include "training/optimizer.h"
#include "training/progress_bar.h"

namespace lockstep::training {
namespace {

std::string Hex(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// The workers of a multi-worker run must hold the same weights after every epoch: each one's
// CRC-32C of them, compared. A difference is a bug (or a worker on other data or code), and
// ends the run rather than export one worker's view of it.
Status CheckWorkersAgree(Workers& workers, const ModelLayout& layout, const WeightMap& weights,
                         int64_t epoch) {
  uint32_t crc = 0;
  for (const auto& [name, shape] : KeptTensors(layout)) {
    const Tensor& t = weights.at(name);
    crc = Crc32c(std::string_view(static_cast<const char*>(t.raw_data()), t.byte_size()), crc);
  }
  std::vector<uint32_t> by_rank(static_cast<size_t>(workers.size()));
  LS_RETURN_IF_ERROR(workers.Gather(crc, by_rank));
  std::string all;
  bool agree = true;
  for (uint32_t c : by_rank) {
    agree = agree && c == by_rank[0];
    all += (all.empty() ? "" : ",") + Hex(c);
  }
  if (!agree) {
    return Internal("the workers' weights differ after epoch " + std::to_string(epoch + 1) +
                    " (crc32c by rank: " + all + ")");
  }
  spdlog::info("event=workers_agree epoch={} rank={} workers={} weights_crc32c={}", epoch + 1, workers.rank(),
               workers.size(), Hex(crc));
  return Status::Ok();
}

// Moves each state towards the step's batch statistic (StateInfo), in float64.
void MoveAverages(std::span<const StateInfo> state, std::span<const std::span<const float>> batch,
                  std::span<const std::span<float>> values) {
  for (size_t i = 0; i < state.size() && i < batch.size(); ++i) {
    const double keep = state[i].momentum;
    for (size_t e = 0; e < values[i].size(); ++e) {
      values[i][e] = static_cast<float>(keep * values[i][e] + (1.0 - keep) * batch[i][e]);
    }
  }
}

// The cores this process may run on.
int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// The checks every row passes (row_decoder.h), for the model as planned. Every embedding looks
// the raw features up: the ids must fit the smallest table.
RowLimits LimitsOf(const ModelConfig& model, int32_t classes) {
  RowLimits limits{.num_classes = classes,
                   .last_layer = "model.layers[" + std::to_string(model.layers.size() - 1) + "]"};
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerConfig& layer = model.layers[i];
    if (layer.type == "embedding" && (limits.vocabulary == 0 || layer.vocabulary < limits.vocabulary)) {
      limits.vocabulary = layer.vocabulary;
      limits.embedding_layer = "model.layers[" + std::to_string(i) + "]";
    }
  }
  return limits;
}

// Checks every row of `t` before training, so that a bad value is named by its file, line
// (or record offset) and column rather than failing a step.
Status CheckRows(const RowLimits& limits, const LabelledTable& t, const std::string& label) {
  for (int64_t r = 0; r < t.num_rows(); ++r) {
    LS_RETURN_IF_ERROR(
        CheckRow(limits, t.row(r), t.labels[static_cast<size_t>(r)], t.feature_names, label).WithPrefix(t.Where(r)));
  }
  return Status::Ok();
}

// The config's data.augment, on images of model.input_shape (checked when the config was read).
AugmentOptions Augmentation(const TrainConfig& config) {
  const std::vector<int64_t>& image = config.model.input_shape;
  if (image.size() != 3) return {};
  return {.crop_padding = config.data.augment_crop_padding,
          .horizontal_flip = config.data.augment_horizontal_flip,
          .height = image[0],
          .width = image[1],
          .channels = image[2],
          .seed = config.seed};
}

// The training batches: the in-memory pipeline over the training rows, or the streaming one
// over this worker's input shards.
StatusOr<std::unique_ptr<BatchSource>> MakeBatchSource(const TrainConfig& config, const Dataset& dataset,
                                                       const Workers& workers, const RowLimits& limits) {
  const DataConfig& data = config.data;
  if (!dataset.streaming()) {
    return std::unique_ptr<BatchSource>(std::make_unique<BatchPipeline>(
        *dataset.train.table, dataset.train.rows,
        PipelineOptions{.batch_size = config.batch_size,
                        .drop_remainder = config.drop_remainder,
                        .shuffle_buffer = data.shuffle_buffer,
                        .seed = config.seed,
                        .prefetch = data.prefetch,
                        .threads = data.threads,
                        .shard_index = workers.rank(),
                        .shard_count = workers.size(),
                        .augment = Augmentation(config)}));
  }
  const int shards = data.shards > 0 ? data.shards : workers.size();
  if (shards % workers.size() != 0) {
    return InvalidArgument("data.shards: " + std::to_string(shards) + " input shards cannot be dealt evenly to " +
                           std::to_string(workers.size()) + " workers");
  }
  const int per_worker = shards / workers.size();
  StreamingOptions options{.batch_size = config.batch_size,
                           .drop_remainder = config.drop_remainder,
                           .shuffle_buffer = data.shuffle_buffer,
                           .seed = config.seed,
                           .interleave = data.interleave,
                           .prefetch = data.prefetch,
                           .num_shards = shards,
                           .first_shard = workers.rank() * per_worker,
                           .end_shard = (workers.rank() + 1) * per_worker,
                           .records = RecordOptions(data),
                           .limits = limits,
                           .augment = Augmentation(config)};
  LS_ASSIGN_OR_RETURN(std::unique_ptr<StreamingPipeline> streaming,
                      StreamingPipeline::Create(*dataset.scan, std::move(options)));
  spdlog::info(
      "event=input mode=streaming files={} records={} rows_per_epoch={} shards={} worker_shards=[{},{}) "
      "files_read={}",
      dataset.scan->files.size(), dataset.scan->total_records(), streaming->rows_per_epoch(), shards,
      workers.rank() * per_worker, (workers.rank() + 1) * per_worker, streaming->files_read().size());
  return std::unique_ptr<BatchSource>(std::move(streaming));
}

// The next version under `dir`: one more than the highest numeric directory there, else 1.
int64_t NextVersion(const std::filesystem::path& dir) {
  int64_t highest = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.size() > 18 || name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    highest = std::max<int64_t>(highest, std::stoll(name));
  }
  return highest + 1;
}

// Puts a checkpoint's weights and optimiser state back; every weight must be there with the
// layout's size (else the checkpoint is from another model).
Status RestoreCheckpoint(const Checkpoint& c, const ModelLayout& layout, WeightMap& weights,
                         Optimizer& optimizer) {
  std::vector<std::vector<std::vector<float>>> state;
  for (const auto& [name, shape] : KeptTensors(layout)) {
    auto it = c.weights.find(name);
    std::span<float> values = weights[name].mutable_data<float>();
    if (it == c.weights.end() || it->second.size() != values.size()) {
      return InvalidArgument("the checkpoint does not match the model: weight '" + name + "' is " +
                             (it == c.weights.end() ? "missing" : "of another size"));
    }
    std::copy(it->second.begin(), it->second.end(), values.begin());
  }
  for (const WeightInfo& w : layout.weights) {
    auto s = c.optimizer_state.find(w.name);
    state.push_back(s == c.optimizer_state.end() ? std::vector<std::vector<float>>{} : s->second);
  }
  const bool stateless = std::all_of(state.begin(), state.end(), [](const auto& s) { return s.empty(); });
  if (!stateless) optimizer.state() = std::move(state);
  optimizer.set_steps(c.step);
  return Status::Ok();
}

// Writes the serving graph, with its metadata, as <export.dir>/<highest version + 1>/ (the
// bundle writer's atomic rename: a server watching the directory never sees half of it).
// Returns the bundle's path.
StatusOr<std::string> ExportBundle(Model serving_graph, const TrainConfig& config,
                                   const std::string& model_name, const TrainReport& report,
                                   const ModelLayout& layout, const std::string& data_fingerprint) {
  auto& meta = serving_graph.graph.metadata;
  meta["model_name"] = model_name;
  meta["lockstep_version"] = LOCKSTEP_VERSION;
  meta["trained_steps"] = std::to_string(report.steps);
  meta["training_config"] = TrainConfigToJson(config);
  meta["loss"] = config.loss;
  meta["precision"] = config.precision;
  meta["task"] = config.task;
  meta["train_loss"] = fmt::format("{:.6f}", report.train_loss);
  if (layout.regression) {
    meta["train_mse"] = fmt::format("{:.6f}", report.train_mse);
    meta["train_mae"] = fmt::format("{:.6f}", report.train_mae);
    meta["target_names"] = nlohmann::json(layout.data.target_names).dump();
  } else {
    meta["train_accuracy"] = fmt::format("{:.6f}", report.train_accuracy);
    meta["class_names"] = nlohmann::json(layout.data.class_names).dump();
  }
  meta["train_data"] = config.data.train.front();
  meta["data_fingerprint"] = data_fingerprint;
  // Each held-out set's loss with its accuracy, or regression's errors.
  auto held_out = [&](const std::string& set, double loss, double accuracy, double mse, double mae) {
    meta[set + "_loss"] = fmt::format("{:.6f}", loss);
    if (!layout.regression) {
      meta[set + "_accuracy"] = fmt::format("{:.6f}", accuracy);
      return;
    }
    meta[set + "_mse"] = fmt::format("{:.6f}", mse);
    meta[set + "_mae"] = fmt::format("{:.6f}", mae);
  };
  if (report.has_test) held_out("test", report.test_loss, report.test_accuracy, report.test_mse, report.test_mae);
  if (report.has_validation) {
    held_out("validation", report.validation_loss, report.validation_accuracy, report.validation_mse,
             report.validation_mae);
  }
  std::error_code ec;
  std::filesystem::create_directories(config.export_.dir, ec);
  if (ec) return FailedPrecondition("export.dir '" + config.export_.dir + "': " + ec.message());
  const std::filesystem::path dir =
      std::filesystem::path(config.export_.dir) / std::to_string(NextVersion(config.export_.dir));
  LS_RETURN_IF_ERROR(WriteBundle(serving_graph, dir));
  if (layout.regression) {
    spdlog::info("event=export path={} test_mse={:.4f} test_mae={:.4f}", dir.string(), report.test_mse,
                 report.test_mae);
  } else {
    spdlog::info("event=export path={} test_accuracy={:.4f}", dir.string(), report.test_accuracy);
  }
  return dir.string();
}

}  // namespace

StatusOr<TrainReport> Train(const TrainConfig& config, const std::string& model_name,
                            const TrainOptions& options) {
  const bool keep_test_predictions = options.keep_test_predictions;
  const DataConfig& data = config.data;
  if (config.regression() == data.targets.empty()) {
    return InvalidArgument(config.regression() ? "data.targets: task regression needs at least one target"
                                               : "data.targets: are for task regression only");
  }
  LS_ASSIGN_OR_RETURN(Dataset dataset, LoadDataset(data));
  const Part& validation = dataset.validation;
  const Part& test = dataset.test;
  const FeatureStats stats = dataset.TrainingStats();
  LS_ASSIGN_OR_RETURN(ModelLayout layout, PlanModel(config, DataSchema{dataset.feature_keys(), dataset.class_names(), dataset.target_names()}));
  const int32_t classes = layout.num_classes;
  const RowLimits limits = LimitsOf(config.model, classes);
  for (const auto& t : dataset.tables) {
    if (t != nullptr) LS_RETURN_IF_ERROR(CheckRows(limits, *t, data.label));
  }

  Random rng(config.seed);
  WeightMap weights;
  for (const WeightInfo& w : layout.weights) {
    Tensor t(DType::kFloat32, w.shape);
    LS_RETURN_IF_ERROR(Initialize(w.initializer, w.fan_in, w.fan_out, rng, t.mutable_data<float>()));
    weights[w.name] = t;
  }
  for (const StateInfo& s : layout.state) {
    Tensor t(DType::kFloat32, s.shape);
    std::fill(t.mutable_data<float>().begin(), t.mutable_data<float>().end(), s.initial);
    weights[s.name] = t;
  }
  LS_ASSIGN_OR_RETURN(Optimizer optimizer, Optimizer::Create(config.optimizer));
  // export.best_by: the best epoch's weights so far and its metric (higher is better).
  WeightMap best = weights;
  double best_metric = -INFINITY;
  int64_t start_epoch = 0, skip_batches = 0;
  if (options.resume) {
    if (config.checkpoint.dir.empty()) return InvalidArgument("--resume needs checkpoint.dir in the config");
    StatusOr<Checkpoint> c = ReadLatestCheckpoint(config.checkpoint.dir);
    if (c.ok()) {
      LS_RETURN_IF_ERROR(RestoreCheckpoint(c.value(), layout, weights, optimizer));
      if (c->best_metric) {
        best_metric = *c->best_metric;
        for (const auto& [name, shape] : KeptTensors(layout)) {
          auto it = c->best_weights.find(name);
          if (it == c->best_weights.end() || static_cast<int64_t>(it->second.size()) != shape.num_elements()) {
            return InvalidArgument("the checkpoint does not match the model: best weight '" + name + "'");
          }
          best[name] = Tensor::FromVector<float>(shape, it->second);
        }
      }
      start_epoch = c->epoch;
      skip_batches = c->batches_done;
      spdlog::info("event=resume checkpoint_step={} epoch={} batch={}", c->step, c->epoch + 1,
                   c->batches_done);
    } else if (c.status().code() == StatusCode::kNotFound) {
      spdlog::info("event=resume checkpoint=none dir={} action=start_from_scratch", config.checkpoint.dir);
    } else {
      return c.status();
    }
  }
  std::unique_ptr<Workers> alone;
  Workers& workers = options.workers != nullptr ? *options.workers : *(alone = SingleProcess());
  const bool lead = workers.rank() == 0;  // writes checkpoints, events and the export
  std::optional<EventWriter> events;
  if (!config.logdir.empty() && lead) {
    LS_ASSIGN_OR_RETURN(events, EventWriter::Create(config.logdir));
  }

  LS_ASSIGN_OR_RETURN(std::unique_ptr<BatchSource> input, MakeBatchSource(config, dataset, workers, limits));
  BatchSource& pipeline = *input;
  const int64_t total_steps = config.epochs * pipeline.batches_per_epoch();

  // batch_norm's statistics are summed across the workers, each taking part with rows of its own.
  if (const int64_t last = dataset.train_rows() % std::max<int64_t>(config.batch_size, 1);
      !layout.state.empty() && workers.size() > 1 && !dataset.streaming() && !config.drop_remainder && last > 0 &&
      last < workers.size()) {
    return InvalidArgument("batch_size: the epoch's last batch of " + std::to_string(last) + " row" +
                           (last == 1 ? "" : "s") + " leaves a worker with none, which batch_norm's statistics across " +
                           std::to_string(workers.size()) + " workers cannot have: set drop_remainder: true");
  }
  const int cores = UsableCores();
  MirroredStep::Options mirrored;
  mirrored.replicas = config.replicas > 0 ? config.replicas : cores;
  mirrored.threads_per_replica = std::max(1, cores / mirrored.replicas);
  mirrored.first_replica = workers.rank() * mirrored.replicas;
  mirrored.multi_worker = workers.size() > 1;
  mirrored.workers = &workers;
  WeightMap training_weights = TrainingWeights(config, layout, weights);
  LS_ASSIGN_OR_RETURN(std::unique_ptr<MirroredStep> step,
                      MirroredStep::Create(config, layout, training_weights, stats, mirrored));
  spdlog::info(
      "event=start workers=\"{}\" replicas={} threads_per_replica={} precision={} input={} train_rows={} "
      "batch_size={}",
      workers.Describe(), mirrored.replicas, mirrored.threads_per_replica, config.precision,
      dataset.streaming() ? "streaming" : "memory", dataset.train_rows(), config.batch_size);
  // The update: while the replicas reduce, each updating the stretches it has just reduced,
  // when the gradients need nothing else first (another worker's sum, the global norm's
  // clipping); otherwise after the step, on every core (the replicas are idle then).
  ThreadPool update_pool(cores);
  std::vector<Parameter> params = TrainableParameters(config, layout, training_weights);
  const bool update_while_reducing = step->reduces_locally() && config.optimizer.clip_global_norm <= 0;
  const MirroredStep::ReducedFn update_reduced = [&](size_t p, int64_t begin, int64_t end) {
    optimizer.UpdateRange(params, p, static_cast<size_t>(begin), static_cast<size_t>(end));
  };
  if (update_while_reducing) {
    for (size_t i = 0; i < params.size(); ++i) params[i].grad = step->gradients()[i];
  }

  // The moving averages, updated in place after each step.
  std::vector<std::span<float>> state_values;
  for (const StateInfo& s : layout.state) state_values.push_back(weights[s.name].mutable_data<float>());

  TrainReport report;
  report.regression = layout.regression;
  const auto start = std::chrono::steady_clock::now();
  // Saves where the run is: the next batch to train on is `batches_done` of `epoch`.
  auto checkpoint = [&](int64_t epoch, int64_t batches_done) -> Status {
    if (config.checkpoint.dir.empty() || !lead) return Status::Ok();
    Checkpoint c{optimizer.steps(), epoch, batches_done, {}, {}, {}, {}};
    for (const auto& [name, shape] : KeptTensors(layout)) {
      const auto values = weights[name].data<float>();
      c.weights[name].assign(values.begin(), values.end());
      if (best_metric > -INFINITY) {
        const auto b = best[name].data<float>();
        c.best_weights[name].assign(b.begin(), b.end());
      }
    }
    for (size_t i = 0; i < layout.weights.size() && i < optimizer.state().size(); ++i) {
      c.optimizer_state[layout.weights[i].name] = optimizer.state()[i];
    }
    if (best_metric > -INFINITY) c.best_metric = best_metric;
    LS_ASSIGN_OR_RETURN(std::string path, WriteCheckpoint(config.checkpoint.dir, c, config.checkpoint.keep));
    spdlog::info("event=checkpoint path={} step={}", path, c.step);
    return Status::Ok();
  };
  ProgressBar bar(stderr, lead && isatty(STDERR_FILENO) == 1);
  // A step's loss, rows right, squared and absolute errors, summed across the workers.
  std::array<double, 4> metrics{};
  const bool regression = layout.regression;
  const double targets_per_row = regression ? static_cast<double>(classes) : 1.0;
  for (int64_t epoch = start_epoch; epoch < config.epochs; ++epoch) {
    const auto epoch_start = std::chrono::steady_clock::now();
    pipeline.StartEpoch(epoch);
    int64_t epoch_batches = 0;
    if (epoch == start_epoch && skip_batches > 0) {
      pipeline.Skip(skip_batches);
      epoch_batches = skip_batches;
    }
    double loss_sum = 0, squared_sum = 0, absolute_sum = 0;
    int64_t correct = 0, seen = 0, batches = 0;
    while (const Batch* b = pipeline.Next()) {
      // Each step's dropout masks come from the run's seed and the step, so a resumed run
      // draws the same ones.
      const auto dropout_seed = static_cast<int64_t>(
          Random(config.seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(optimizer.steps() + 1)))
              .Next());
      const double lr = ScheduledLearningRate(config.optimizer.schedule, config.optimizer.learning_rate,
                                              optimizer.steps(), total_steps);
      if (update_while_reducing) optimizer.StartStep(params, lr);
      LS_RETURN_IF_ERROR(step->Run(*b, dropout_seed, update_while_reducing ? &update_reduced : nullptr));
      metrics = {step->loss(), static_cast<double>(step->correct()), step->squared_error(), step->absolute_error()};
      MoveAverages(layout.state, step->batch_state(), state_values);
      if (workers.size() > 1) {
        LS_RETURN_IF_ERROR(workers.SumInRankOrder(step->flat_gradients()));
        LS_RETURN_IF_ERROR(workers.SumInRankOrder(std::span<double>(metrics)));
      }
      loss_sum += metrics[0];
      correct += static_cast<int64_t>(metrics[1]);
      squared_sum += metrics[2];
      absolute_sum += metrics[3];
      ++batches;
      seen += b->global_rows;
      if (!update_while_reducing) {
        const std::span<const std::span<float>> grads = step->gradients();
        for (size_t i = 0; i < params.size(); ++i) params[i].grad = grads[i];
        if (config.optimizer.clip_global_norm > 0) ClipByGlobalNorm(grads, config.optimizer.clip_global_norm);
        optimizer.Apply(params, lr, &update_pool);
      }
      ++epoch_batches;
      const double so_far =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
      bar.Update({.epoch = epoch + 1,
                  .epochs = config.epochs,
                  .batch = epoch_batches,
                  .batches = pipeline.batches_per_epoch(),
                  .loss = loss_sum / static_cast<double>(batches),
                  .samples_per_second = static_cast<double>(seen) / std::max(so_far, 1e-9),
                  .eta_seconds = so_far / static_cast<double>(batches) *
                                 static_cast<double>(pipeline.batches_per_epoch() - epoch_batches)});
      const int64_t steps = optimizer.steps();
      if (config.checkpoint.every_steps > 0 && steps % config.checkpoint.every_steps == 0) {
        LS_RETURN_IF_ERROR(checkpoint(epoch, epoch_batches));
      }
      if (options.stop_after_steps > 0 && steps >= options.stop_after_steps) {
        if (config.checkpoint.every_steps <= 0 || steps % config.checkpoint.every_steps != 0) {
          LS_RETURN_IF_ERROR(checkpoint(epoch, epoch_batches));
        }
        report.steps = steps;
        report.stopped_early = true;
        return report;
      }
    }
    bar.Clear();
    LS_RETURN_IF_ERROR(pipeline.status());
    LS_RETURN_IF_ERROR(checkpoint(epoch + 1, 0));
    report.steps = optimizer.steps();
    report.train_loss = loss_sum / static_cast<double>(std::max<int64_t>(batches, 1));
    report.train_accuracy = static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(seen, 1));
    const double values = static_cast<double>(std::max<int64_t>(seen, 1)) * targets_per_row;
    report.train_mse = squared_sum / values;
    report.train_mae = absolute_sum / values;

    if (workers.size() > 1) LS_RETURN_IF_ERROR(CheckWorkersAgree(workers, layout, weights, epoch));
    if (!lead) continue;
    std::optional<Evaluation> val;
    if (validation.table != nullptr) {
      LS_ASSIGN_OR_RETURN(Model serving_graph, BuildServingGraph(config, layout, weights, stats));
      LS_ASSIGN_OR_RETURN(std::unique_ptr<Session> serving, Session::Create(std::move(serving_graph)));
      LS_ASSIGN_OR_RETURN(val, Evaluate(*serving, config, validation));
      const std::string& by = config.export_.best_by;
      const double metric = by == "val_loss" ? -val->loss : by == "val_mae" ? -val->mae : val->accuracy;
      if (!config.export_.best_by.empty() && metric > best_metric) {
        best_metric = metric;
        for (auto& [name, t] : weights) {
          best[name] = Tensor::FromVector<float>(t.shape(), {t.data<float>().begin(), t.data<float>().end()});
        }
      }
    }
    const double epoch_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - epoch_start).count();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double eta =
        elapsed / static_cast<double>(epoch + 1) * static_cast<double>(config.epochs - epoch - 1);
    auto shown = [&](double Evaluation::*field) { return val ? fmt::format("{:.4f}", (*val).*field) : "-"; };
    // The task's metrics: accuracy, or regression's mean squared and absolute errors.
    const std::string metrics_text =
        regression ? fmt::format("mse={:.4f} mae={:.4f} val_loss={} val_mse={} val_mae={}", report.train_mse,
                                 report.train_mae, shown(&Evaluation::loss), shown(&Evaluation::mse),
                                 shown(&Evaluation::mae))
                   : fmt::format("accuracy={:.4f} val_loss={} val_accuracy={}", report.train_accuracy,
                                 shown(&Evaluation::loss), shown(&Evaluation::accuracy));
    spdlog::info("event=epoch epoch={}/{} loss={:.4f} {} samples_per_s={:.0f} elapsed_s={:.1f} eta_s={:.1f}",
                 epoch + 1, config.epochs, report.train_loss, metrics_text,
                 static_cast<double>(seen) / std::max(epoch_s, 1e-9), elapsed, eta);
    if (events) {
      const int64_t step = optimizer.steps();
      LS_RETURN_IF_ERROR(events->AddScalar("loss", step, report.train_loss));
      if (regression) {
        LS_RETURN_IF_ERROR(events->AddScalar("mse", step, report.train_mse));
        LS_RETURN_IF_ERROR(events->AddScalar("mae", step, report.train_mae));
      } else {
        LS_RETURN_IF_ERROR(events->AddScalar("accuracy", step, report.train_accuracy));
      }
      LS_RETURN_IF_ERROR(events->AddScalar("samples_per_s", step, static_cast<double>(seen) / epoch_s));
      LS_RETURN_IF_ERROR(
          events->AddScalar("learning_rate", step,
                            ScheduledLearningRate(config.optimizer.schedule, config.optimizer.learning_rate,
                                                  step, total_steps)));
      if (val) {
        LS_RETURN_IF_ERROR(events->AddScalar("val_loss", step, val->loss));
        if (regression) {
          LS_RETURN_IF_ERROR(events->AddScalar("val_mse", step, val->mse));
          LS_RETURN_IF_ERROR(events->AddScalar("val_mae", step, val->mae));
        } else {
          LS_RETURN_IF_ERROR(events->AddScalar("val_accuracy", step, val->accuracy));
        }
      }
      LS_RETURN_IF_ERROR(events->Flush());
    }
  }

  if (!lead) {
    report.steps = optimizer.steps();
    return report;
  }
  const WeightMap& exported = config.export_.best_by.empty() ? weights : best;
  LS_ASSIGN_OR_RETURN(Model serving_graph, BuildServingGraph(config, layout, exported, stats));
  {
    LS_ASSIGN_OR_RETURN(std::unique_ptr<Session> serving, Session::Create(serving_graph));
    if (validation.table != nullptr) {
      LS_ASSIGN_OR_RETURN(Evaluation v, Evaluate(*serving, config, validation));
      report.has_validation = true;
      report.validation_accuracy = v.accuracy;
      report.validation_loss = v.loss;
      report.validation_mse = v.mse;
      report.validation_mae = v.mae;
    }
    if (test.table != nullptr) {
      LS_ASSIGN_OR_RETURN(
          Evaluation t,
          Evaluate(*serving, config, test, keep_test_predictions ? &report.test_features : nullptr,
                   keep_test_predictions ? &report.test_probabilities : nullptr));
      report.num_features = static_cast<int64_t>(dataset.feature_names().size());
      report.num_classes = classes;
      report.has_test = true;
      report.test_accuracy = t.accuracy;
      report.test_loss = t.loss;
      report.test_mse = t.mse;
      report.test_mae = t.mae;
    }
  }
  if (!config.export_.dir.empty()) {
    LS_ASSIGN_OR_RETURN(report.export_path, ExportBundle(std::move(serving_graph), config, model_name, report,
                                                         layout, dataset.Fingerprint()));
  }
  return report;
}

}  // namespace lockstep::training
