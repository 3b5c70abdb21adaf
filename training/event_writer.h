// TensorBoard event files: model-train's loss, accuracy, learning rate and throughput as
// scalar summaries TensorBoard plots. A file is TFRecord-framed tensorflow.Event records,
// named events.out.tfevents.<seconds>.<host>, the first record declaring "brain.Event:2".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/status.h"
#include "runtime/tfrecord.h"

namespace lockstep::training {

class EventWriter {
 public:
  // Creates `logdir` (and its parents) when missing and a new event file in it.
  static StatusOr<EventWriter> Create(const std::string& logdir);

  // One scalar at a training step. Written through; Flush makes it visible to TensorBoard.
  Status AddScalar(std::string_view tag, int64_t step, double value);
  Status Flush() { return records_.Flush(); }

  const std::string& path() const { return path_; }

 private:
  EventWriter(std::string path, TfRecordWriter records)
      : path_(std::move(path)), records_(std::move(records)) {}

  std::string path_;
  TfRecordWriter records_;
};

}  // namespace lockstep::training
