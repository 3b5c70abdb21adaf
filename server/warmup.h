// TensorFlow Serving's warm-up files: a version directory's
// assets.extra/tf_serving_warmup_requests, a TFRecord file of PredictionLog records
// (tensorflow_serving/apis/prediction_log.proto), replayed once the version has loaded and
// before it becomes available, so that its first real requests meet a model that has already
// run. Any version carries one the same way: a SavedModel, a Lockstep bundle or an ONNX model.
//
// As upstream: at most 1000 records; each record runs `iterations` times
// (--num_request_iterations_for_warmup) before the next; predict, predict-streamed, classify,
// regress and multi-inference logs run as the gRPC calls of the same requests would, on the
// version alone (the model name and version in a logged request are not read: nothing routes
// to a version that is not available yet). The responses logged beside the requests are not
// compared. A record that cannot be read or run fails the load, naming the file and the record
// (its number from 0 and its byte offset); a session_run_log (TensorFlow's Session.Run) is such
// a record, since Lockstep has no Session.Run API. A record with no log at all is skipped, as
// upstream skips it.
#pragma once

#include <cstdint>
#include <string_view>

#include "model_store/manager.h"
#include "runtime/status.h"

namespace lockstep {

inline constexpr std::string_view kTfServingWarmupFile = "assets.extra/tf_serving_warmup_requests";
inline constexpr int64_t kMaxTfServingWarmupRecords = 1000;

struct WarmupReplay {
  int64_t records = 0;  // 0: the version has no warm-up file
  int64_t runs = 0;     // requests run: records x iterations (a streamed log's requests each count,
                        // a record with no log none)
};

// Replays `version`'s warm-up file, if its directory has one.
StatusOr<WarmupReplay> ReplayWarmupFile(const ServableHandle& version, int iterations);

}  // namespace lockstep
