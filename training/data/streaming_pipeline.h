// The streaming input: training data read from its files epoch after epoch, never held whole,
// as tf.data's list_files + interleave + shuffle + batch reads it, sharded across workers.
//
// - Input shards. A global batch is made of `num_shards` parts, part s holding rows
//   [b s / S, b (s + 1) / S) of it, each from its own stream over its own files: file f goes
//   to shard f mod S; with fewer files than shards, the shards that share a file take every
//   k-th record of it. A worker of a multi-worker run owns a run of shards and opens only
//   their files, and the global batch is the same bits as one process owning every shard
//   would assemble.
// - In each shard, an epoch visits the files in an order shuffled per (seed, epoch, shard)
//   (when shuffling at all), reads `interleave` of them at once, one record from each in
//   turn (a finished file's place is taken by the next, which reads in the same turn), and
//   passes the rows through a
//   shuffle buffer of `shuffle_buffer` rows (tf.data's shuffle; the same draws as the
//   in-memory pipeline's, so that one file, one shard and one file at a time give the
//   in-memory pipeline's batches bit for bit).
// - An epoch is as many batches as the shortest shard fills (every shard's length is known
//   from the scan, data_scan.h), whole batches only when there are several shards; the longer
//   shards' last rows wait for another epoch's order. Shards of about equal length lose least.
// - Deterministic for each (seed, epoch), whatever the timing: one background thread reads,
//   decodes and assembles batch after batch ahead of the trainer. Skip(n) (a resumed run)
//   reads through the n batches and drops them, so a run resumed mid-epoch, mid-file, sees
//   the batches the uninterrupted run saw.
// - Memory: the shuffle buffer, the prefetched batches and one record per open file (and about
//   400 KB of zlib's buffers per open gzip file).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "training/data/data_scan.h"
#include "training/data/pipeline.h"
#include "training/data/record_stream.h"
#include "training/data/row_decoder.h"
#include "training/random.h"

namespace lockstep::training {

struct StreamingOptions {
  int64_t batch_size = 32;
  bool drop_remainder = false;
  int64_t shuffle_buffer = 0;  // rows; 0 or 1: none (and the files in the order given)
  uint64_t seed = 0;
  int64_t interleave = 1;  // files read at once in a shard
  int prefetch = 2;        // batches assembled ahead (0: by Next itself)
  int num_shards = 1;      // parts of a global batch
  int first_shard = 0;     // this process's shards: [first_shard, end_shard)
  int end_shard = 1;
  TfRecordReader::Options records = {};
  RowLimits limits = {};  // every row is checked against them (num_classes 0: labels unchecked)
  AugmentOptions augment = {};  // as PipelineOptions::augment
};

class StreamingPipeline final : public BatchSource {
 public:
  // `scan` (of the training files) must outlive the pipeline. Fails when a shard would have
  // no rows or no part of a batch. Starts at epoch 0.
  static StatusOr<std::unique_ptr<StreamingPipeline>> Create(const DataScan& scan, StreamingOptions options);

  int64_t batches_per_epoch() const override { return batches_; }
  void StartEpoch(int64_t epoch) override;
  void Skip(int64_t count) override { ring_.Skip(count); }
  const Batch* Next() override { return ring_.Next(); }
  Status status() const override { return ring_.status(); }

  // Of all the shards' rows, those an epoch trains on.
  int64_t rows_per_epoch() const;
  // The rows this process's shuffle buffers can hold: the bound on what it keeps of the data.
  int64_t buffered_rows_capacity() const;
  // The files this process reads (indices into the scan's), for the sharding tests.
  std::vector<size_t> files_read() const;

 private:
  // A file's part in a shard: records i with i % stride == residue.
  struct Slice {
    size_t file = 0;
    int64_t stride = 1, residue = 0, rows = 0;
  };
  struct OpenFile {
    OpenFile(RecordStream s, const RowFormat& format) : stream(std::move(s)), decoder(format) {}
    RecordStream stream;
    RowDecoder decoder;
    const Slice* slice = nullptr;
    int64_t index = 0;  // of the next record in the file
    int64_t taken = 0;  // rows of the slice read so far
  };
  struct Shard {
    int index = 0;
    std::vector<Slice> slices;
    int64_t rows = 0, part = 0;
    // The epoch's state.
    std::vector<size_t> order;  // of the slices
    size_t next_slice = 0;
    bool opened = false;
    std::vector<std::unique_ptr<OpenFile>> cycle;
    size_t cursor = 0;
    std::vector<float> buffer;  // the shuffle buffer: capacity rows
    std::vector<int32_t> labels;
    std::vector<float> targets;  // regression: capacity rows of num_targets
    int64_t capacity = 0, held = 0;
    bool filled = false;
    Random rng{0};
  };

  StreamingPipeline(const DataScan& scan, StreamingOptions options, std::vector<Shard> shards,
                    std::vector<int64_t> all_rows, std::vector<int64_t> all_parts, int64_t batches);

  void ResetShard(Shard& shard, int64_t epoch);
  StatusOr<std::unique_ptr<OpenFile>> Open(const Slice& slice) const;
  // Where a row goes: its features, label and (regression) targets.
  struct RowOut {
    float* features;
    int32_t* label;
    float* targets;
  };
  // The shard's next row in file order (interleaved), into `out`: false at its end.
  StatusOr<bool> NextInput(Shard& shard, RowOut out);
  // The shard's next row after the shuffle buffer.
  Status NextRow(Shard& shard, RowOut out);
  // Batch `index`'s rows from every shard of this process; null buffers: read and dropped.
  Status Produce(int64_t index, float* features, int32_t* labels, float* targets);
  Status Assemble(int64_t index, BatchBuffers& out);
  Status AssembleInOrder(int64_t index, BatchBuffers& out);
  static int64_t RowsOf(int64_t rows, int64_t part, int64_t index);

  const DataScan& scan_;
  const StreamingOptions options_;
  std::vector<Shard> shards_;  // this process's
  const std::vector<int64_t> all_rows_, all_parts_;  // every shard's, for the epoch's batches
  const int64_t batches_;
  int64_t epoch_ = 0;
  int64_t next_index_ = 0;  // the batch the streams are at
  std::vector<float> dropped_row_;
  std::vector<int32_t> dropped_label_;
  std::vector<float> dropped_targets_;
  BatchRing ring_;  // last: its thread stops before the members above go
};

}  // namespace lockstep::training
