#include "training/data/streaming_pipeline.h"

#include <algorithm>
#include <cstring>
#include <span>

namespace lockstep::training {
namespace {

// Keeps each shard's draws apart from the others' and from the file order's.
constexpr uint64_t kShardSeed = 0xbf58476d1ce4e5b9ULL;
constexpr uint64_t kFileOrderSeed = 0x94d049bb133111ebULL;

}  // namespace

StatusOr<std::unique_ptr<StreamingPipeline>> StreamingPipeline::Create(const DataScan& scan,
                                                                       StreamingOptions options) {
  const int64_t s_count = std::max(options.num_shards, 1);
  const int64_t b = std::max<int64_t>(options.batch_size, 1);
  if (b < s_count) {
    return InvalidArgument("batch_size " + std::to_string(b) + " is smaller than the " + std::to_string(s_count) +
                           " input shards: each shard needs a row of every batch");
  }
  const auto files = static_cast<int64_t>(scan.files.size());
  if (files == 0 || scan.records.size() != scan.files.size()) return InvalidArgument("no training files");
  std::vector<Shard> all(static_cast<size_t>(s_count));
  for (int64_t s = 0; s < s_count; ++s) {
    Shard& shard = all[static_cast<size_t>(s)];
    shard.index = static_cast<int>(s);
    shard.part = b * (s + 1) / s_count - b * s / s_count;
    if (files >= s_count) {
      for (int64_t f = s; f < files; f += s_count) {
        shard.slices.push_back({static_cast<size_t>(f), 1, 0, scan.records[static_cast<size_t>(f)]});
      }
    } else {
      // Fewer files than shards: file f is shared by the shards f, f + F, f + 2F, ...
      const int64_t f = s % files;
      const int64_t stride = (s_count - f + files - 1) / files;
      const int64_t residue = s / files;
      const int64_t n = scan.records[static_cast<size_t>(f)];
      shard.slices.push_back({static_cast<size_t>(f), stride, residue, n > residue ? (n - residue + stride - 1) / stride : 0});
    }
    for (const Slice& slice : shard.slices) shard.rows += slice.rows;
  }
  std::vector<int64_t> all_rows, all_parts;
  int64_t batches = INT64_MAX;
  // With several shards every batch is whole: a short last batch would be split among the
  // shards otherwise than among the replicas that train on it, and one process owning every
  // shard would then sum its gradients in another grouping than the workers do.
  const bool whole_batches = options.drop_remainder || s_count > 1;
  for (const Shard& shard : all) {
    if (shard.rows == 0) {
      return InvalidArgument("input shard " + std::to_string(shard.index) + " of " + std::to_string(s_count) +
                             " has no records: there are " + std::to_string(scan.total_records()) +
                             " in " + std::to_string(files) + " file(s)");
    }
    all_rows.push_back(shard.rows);
    all_parts.push_back(shard.part);
    batches = std::min(batches, whole_batches ? shard.rows / shard.part
                                                       : (shard.rows + shard.part - 1) / shard.part);
  }
  if (batches == 0) {
    return InvalidArgument("no whole batch: an input shard has fewer rows than its part of a batch of " +
                           std::to_string(b));
  }
  std::vector<Shard> mine;
  for (int s = std::max(options.first_shard, 0); s < std::min<int>(options.end_shard, static_cast<int>(s_count)); ++s) {
    mine.push_back(std::move(all[static_cast<size_t>(s)]));
  }
  if (mine.empty()) return InvalidArgument("this process owns no input shard");
  return std::unique_ptr<StreamingPipeline>(new StreamingPipeline(scan, std::move(options), std::move(mine),
                                                                  std::move(all_rows), std::move(all_parts), batches));
}

StreamingPipeline::StreamingPipeline(const DataScan& scan, StreamingOptions options, std::vector<Shard> shards,
                                     std::vector<int64_t> all_rows, std::vector<int64_t> all_parts, int64_t batches)
    : scan_(scan),
      options_(std::move(options)),
      shards_(std::move(shards)),
      all_rows_(std::move(all_rows)),
      all_parts_(std::move(all_parts)),
      batches_(batches),
      dropped_row_(static_cast<size_t>(scan.format.num_features())),
      dropped_label_(1),
      dropped_targets_(static_cast<size_t>(scan.format.num_targets())),
      ring_(options_.batch_size, scan.format.num_features(), scan.format.num_targets(), options_.prefetch, 1,
            [this](int64_t index, BatchBuffers& out) { return Assemble(index, out); }) {
  const auto f = static_cast<size_t>(scan.format.num_features());
  for (Shard& shard : shards_) {
    shard.capacity = options_.shuffle_buffer > 1 ? std::min(options_.shuffle_buffer, shard.rows) : 0;
    shard.buffer.resize(static_cast<size_t>(shard.capacity) * f);
    shard.labels.resize(static_cast<size_t>(shard.capacity));
    shard.targets.resize(static_cast<size_t>(shard.capacity * scan.format.num_targets()));
  }
  StartEpoch(0);
}

int64_t StreamingPipeline::rows_per_epoch() const {
  int64_t rows = 0;
  for (size_t s = 0; s < all_rows_.size(); ++s) rows += std::min(all_rows_[s], batches_ * all_parts_[s]);
  return rows;
}

int64_t StreamingPipeline::buffered_rows_capacity() const {
  int64_t rows = 0;
  for (const Shard& shard : shards_) rows += shard.capacity;
  return rows;
}

std::vector<size_t> StreamingPipeline::files_read() const {
  std::vector<size_t> files;
  for (const Shard& shard : shards_) {
    for (const Slice& slice : shard.slices) files.push_back(slice.file);
  }
  return files;
}

void StreamingPipeline::ResetShard(Shard& shard, int64_t epoch) {
  const uint64_t seed = EpochShuffleSeed(options_.seed, epoch) ^ (kShardSeed * static_cast<uint64_t>(shard.index));
  shard.order.resize(shard.slices.size());
  for (size_t i = 0; i < shard.order.size(); ++i) shard.order[i] = i;
  if (options_.shuffle_buffer > 1) {
    Random files(seed ^ kFileOrderSeed);
    Shuffle(std::span<size_t>(shard.order), files);
  }
  shard.next_slice = 0;
  shard.opened = false;
  shard.cycle.clear();
  shard.cursor = 0;
  shard.held = 0;
  shard.filled = false;
  shard.rng = Random(seed);
}

void StreamingPipeline::StartEpoch(int64_t epoch) {
  ring_.Start(batches_, [&] {
    epoch_ = epoch;
    for (Shard& shard : shards_) ResetShard(shard, epoch);
    next_index_ = 0;
  });
}

StatusOr<std::unique_ptr<StreamingPipeline::OpenFile>> StreamingPipeline::Open(const Slice& slice) const {
  LS_ASSIGN_OR_RETURN(RecordStream stream,
                      RecordStream::Open(scan_.files[slice.file], scan_.format.format, options_.records));
  auto file = std::make_unique<OpenFile>(std::move(stream), scan_.format);
  LS_RETURN_IF_ERROR(file->decoder.StartFile(file->stream));
  file->slice = &slice;
  return file;
}

StatusOr<bool> StreamingPipeline::NextInput(Shard& shard, RowOut out) {
  if (!shard.opened) {
    shard.opened = true;
    while (static_cast<int64_t>(shard.cycle.size()) < std::max<int64_t>(options_.interleave, 1) &&
           shard.next_slice < shard.order.size()) {
      LS_ASSIGN_OR_RETURN(std::unique_ptr<OpenFile> file, Open(shard.slices[shard.order[shard.next_slice++]]));
      shard.cycle.push_back(std::move(file));
    }
  }
  const auto f = static_cast<size_t>(scan_.format.num_features());
  const auto t = static_cast<size_t>(scan_.format.num_targets());
  std::string_view record;
  while (!shard.cycle.empty()) {
    OpenFile& file = *shard.cycle[shard.cursor];
    while (true) {
      LS_ASSIGN_OR_RETURN(bool more, file.stream.Next(&record));
      if (!more) break;
      const int64_t i = file.index++;
      if (i % file.slice->stride != file.slice->residue) continue;
      RawLabel raw;
      LS_RETURN_IF_ERROR(file.decoder.Decode(record, file.stream, std::span<float>(out.features, f), raw,
                                             std::span<float>(out.targets, t)));
      LS_RETURN_IF_ERROR(file.decoder.Resolve(raw, file.stream, *out.label));
      if (options_.limits.num_classes > 0) {
        if (Status s = CheckRow(options_.limits, std::span<const float>(out.features, f), *out.label,
                                scan_.format.feature_names, scan_.format.label);
            !s.ok()) {
          return s.WithPrefix(file.stream.Where());
        }
      }
      ++file.taken;
      shard.cursor = (shard.cursor + 1) % shard.cycle.size();
      return true;
    }
    if (file.taken != file.slice->rows) {
      return FailedPrecondition(file.stream.path() + ": the file changed while training: " +
                                std::to_string(file.taken) + " records where the scan before the first epoch found " +
                                std::to_string(file.slice->rows));
    }
    if (shard.next_slice < shard.order.size()) {
      LS_ASSIGN_OR_RETURN(shard.cycle[shard.cursor], Open(shard.slices[shard.order[shard.next_slice++]]));
      continue;  // the next file takes the finished one's turn
    }
    shard.cycle.erase(shard.cycle.begin() + static_cast<std::ptrdiff_t>(shard.cursor));
    if (shard.cursor >= shard.cycle.size()) shard.cursor = 0;
  }
  return false;
}

Status StreamingPipeline::NextRow(Shard& shard, RowOut out) {
  auto ran_out = [&] {
    return FailedPrecondition("input shard " + std::to_string(shard.index) +
                              ": the files changed while training (fewer records than the scan found)");
  };
  if (shard.capacity <= 1) {
    LS_ASSIGN_OR_RETURN(bool got, NextInput(shard, out));
    return got ? Status::Ok() : ran_out();
  }
  const auto f = static_cast<size_t>(scan_.format.num_features());
  const auto t = static_cast<size_t>(scan_.format.num_targets());
  auto held = [&](int64_t i) {
    const auto at = static_cast<size_t>(i);
    return RowOut{shard.buffer.data() + at * f, &shard.labels[at], shard.targets.data() + at * t};
  };
  auto copy = [&](RowOut from, RowOut to) {
    std::memcpy(to.features, from.features, f * sizeof(float));
    *to.label = *from.label;
    if (t > 0) std::memcpy(to.targets, from.targets, t * sizeof(float));
  };
  if (!shard.filled) {
    shard.filled = true;
    while (shard.held < shard.capacity) {
      LS_ASSIGN_OR_RETURN(bool got, NextInput(shard, held(shard.held)));
      if (!got) break;
      ++shard.held;
    }
  }
  if (shard.held == 0) return ran_out();
  const auto pick = static_cast<int64_t>(shard.rng.Below(static_cast<uint64_t>(shard.held)));
  copy(held(pick), out);
  LS_ASSIGN_OR_RETURN(bool got, NextInput(shard, held(pick)));
  if (!got && --shard.held != pick) {  // the input is done: the last row held takes the pick's place
    copy(held(shard.held), held(pick));
  }
  return Status::Ok();
}

int64_t StreamingPipeline::RowsOf(int64_t rows, int64_t part, int64_t index) {
  return std::clamp<int64_t>(rows - index * part, 0, part);
}

Status StreamingPipeline::Produce(int64_t index, float* features, int32_t* labels, float* targets) {
  const auto f = static_cast<size_t>(scan_.format.num_features());
  const auto t = static_cast<size_t>(scan_.format.num_targets());
  int64_t offset = 0;
  for (Shard& shard : shards_) {
    const int64_t n = RowsOf(shard.rows, shard.part, index);
    for (int64_t r = 0; r < n; ++r, ++offset) {
      float* row = features != nullptr ? features + static_cast<size_t>(offset) * f : dropped_row_.data();
      int32_t* label = labels != nullptr ? labels + offset : dropped_label_.data();
      float* target = targets != nullptr ? targets + static_cast<size_t>(offset) * t : dropped_targets_.data();
      LS_RETURN_IF_ERROR(NextRow(shard, RowOut{row, label, target}));
    }
  }
  return Status::Ok();
}

Status StreamingPipeline::Assemble(int64_t index, BatchBuffers& out) {
  Status s = AssembleInOrder(index, out);
  if (!s.ok()) next_index_ = INT64_MAX;  // the streams stopped mid-batch: any next ask replays
  return s;
}

Status StreamingPipeline::AssembleInOrder(int64_t index, BatchBuffers& out) {
  // Batches come in order from one thread; a gap is a Skip, read through and dropped.
  // The streams cannot go back: a Skip after batches were made ahead starts the epoch again.
  if (index < next_index_) {
    for (Shard& shard : shards_) ResetShard(shard, epoch_);
    next_index_ = 0;
  }
  for (; next_index_ < index; ++next_index_) LS_RETURN_IF_ERROR(Produce(next_index_, nullptr, nullptr, nullptr));
  LS_RETURN_IF_ERROR(Produce(index, out.features.data(), out.labels.data(), out.targets.data()));
  next_index_ = index + 1;
  out.rows = 0;
  for (const Shard& shard : shards_) out.rows += RowsOf(shard.rows, shard.part, index);
  out.global_rows = 0;
  int64_t first = index * options_.batch_size;  // this worker's first row in the epoch's order
  for (size_t s = 0; s < all_rows_.size(); ++s) {
    const int64_t rows = RowsOf(all_rows_[s], all_parts_[s], index);
    out.global_rows += rows;
    if (static_cast<int>(s) < options_.first_shard) first += rows;
  }
  out.global_begin = first - index * options_.batch_size;
  AugmentBatch(options_.augment, epoch_, first, out);
  return Status::Ok();
}

}  // namespace lockstep::training
