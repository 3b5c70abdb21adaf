// model-cli warmup --from-log: a warm-up file (TF Serving's assets.extra/tf_serving_warmup_requests,
// a TFRecord of PredictionLog) cut from request logs that model-server's logging_config wrote,
// so that a new version warms up on the traffic it will meet.
//
// The records are copied byte for byte. A record is left out when it cannot be replayed: one
// whose values were truncated (log_metadata.truncated, Lockstep's field 1002: its tensors have
// shapes and no values), one with no request (a session_run_log, or none), or, with a model
// name, one another model answered. Of the rest, at most `max` are kept, drawn uniformly over
// all of them (reservoir sampling with a fixed seed, so the same logs give the same file) and
// written in the logs' order. The record is read as protobuf's wire format, so this needs no
// TF Serving messages: runtime/ knows TFRecord and protobuf, not the server's APIs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/status.h"

namespace lockstep {

// What a PredictionLog record holds, as far as a warm-up file cares.
struct PredictionLogSummary {
  bool has_request = false;  // a predict, streamed predict, classify, regress or multi-inference log
  bool truncated = false;
  std::string model;  // log_metadata.model_spec.name
};

// InvalidArgument when `record` is not protobuf wire format.
StatusOr<PredictionLogSummary> SummarizePredictionLog(std::string_view record);

struct WarmupCutOptions {
  std::vector<std::string> patterns;  // files or glob patterns, each matching at least one file
  std::string out;                    // the warm-up file; its directories are made
  int64_t max_records = 100;          // at most 1000, TF Serving's limit for a warm-up file
  std::string model;                  // keep only this model's records; empty: any
  uint64_t seed = 0;
  bool overwrite = false;
};

struct WarmupCut {
  int64_t files = 0;
  int64_t records = 0;    // read
  int64_t kept = 0;       // written to the warm-up file
  int64_t truncated = 0;  // left out: values truncated
  int64_t no_request = 0;
  int64_t other_model = 0;
  std::string manifest;  // the bundle manifest the file was listed in, if it went into a bundle
};

// Errors name the file and the record's number: an unreadable file, a damaged record (CRC), a
// record that is not a PredictionLog, no record to keep, an existing `out` without overwrite.
// A warm-up file written into a bundle (<version>/assets.extra/tf_serving_warmup_requests, the
// version holding a MANIFEST.sha256) is listed in its manifest, so that the bundle stays valid:
// cut it into a version before the version is published, since a bundle a server has loaded is
// immutable (bundle.h).
StatusOr<WarmupCut> CutWarmupFromLogs(const WarmupCutOptions& options);

// That listing alone: adds (or replaces) the warm-up file's line in its bundle's manifest and
// returns the manifest's path; empty, and nothing done, when the file is not in a bundle.
StatusOr<std::string> ListInBundleManifest(const std::filesystem::path& warmup_file);

}  // namespace lockstep
