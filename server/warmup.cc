#include "server/warmup.h"

#include <google/protobuf/unknown_field_set.h>

#include <filesystem>
#include <string>
#include <vector>

#include "runtime/tfrecord.h"
#include "server/inference.h"
#include "server/predict_api.h"
#include "tensorflow_serving/apis/prediction_log.pb.h"

namespace lockstep {

namespace tfs = tensorflow::serving;

namespace {

constexpr int kSessionRunLogField = 5;  // PredictionLog.session_run_log, upstream's

// Runs what one record logged, once, on `runner`'s version. The tensors are the replay's own,
// reused from record to record.
class RecordReplayer {
 public:
  explicit RecordReplayer(const GraphRunner& runner) : runner_(runner) {}

  // How many requests `log` holds: it runs that many (none for a record with no log).
  StatusOr<int64_t> Run(const tfs::PredictionLog& log) {
    switch (log.log_type_case()) {
      case tfs::PredictionLog::kPredictLog:
        LS_RETURN_IF_ERROR(Predict(log.predict_log().request()));
        return 1;
      case tfs::PredictionLog::kPredictStreamedLog: {
        const auto& requests = log.predict_streamed_log().request();
        if (requests.empty()) return InvalidArgument("its predict_streamed_log holds no request");
        for (const tfs::PredictRequest& request : requests) LS_RETURN_IF_ERROR(Predict(request));
        return requests.size();
      }
      case tfs::PredictionLog::kClassifyLog: {
        const tfs::ClassificationRequest& request = log.classify_log().request();
        LS_ASSIGN_OR_RETURN(const Signature* signature, Find(request.model_spec()));
        tfs::ClassificationResult result;
        LS_RETURN_IF_ERROR(RunClassify(runner_, *signature, request.input(), &result));
        return 1;
      }
      case tfs::PredictionLog::kRegressLog: {
        const tfs::RegressionRequest& request = log.regress_log().request();
        LS_ASSIGN_OR_RETURN(const Signature* signature, Find(request.model_spec()));
        tfs::RegressionResult result;
        LS_RETURN_IF_ERROR(RunRegress(runner_, *signature, request.input(), &result));
        return 1;
      }
      case tfs::PredictionLog::kMultiInferenceLog:
        LS_RETURN_IF_ERROR(MultiInference(log.multi_inference_log().request()));
        return 1;
      case tfs::PredictionLog::LOG_TYPE_NOT_SET:
        break;
    }
    // Upstream's session_run_log (field 5) reads as an unknown field here; a record with no log
    // at all is skipped, as upstream skips it.
    const google::protobuf::UnknownFieldSet& unknown = log.GetReflection()->GetUnknownFields(log);
    for (int i = 0; i < unknown.field_count(); ++i) {
      if (unknown.field(i).number() == kSessionRunLogField) {
        return Unimplemented("it holds a session_run_log (TensorFlow's Session.Run), which Lockstep has no API for");
      }
    }
    return 0;
  }

 private:
  StatusOr<const Signature*> Find(const tfs::ModelSpec& spec) const {
    return FindServingSignature(runner_.servable->session(), spec.signature_name());
  }

  Status Predict(const tfs::PredictRequest& request) {
    LS_ASSIGN_OR_RETURN(const Signature* signature, Find(request.model_spec()));
    LS_RETURN_IF_ERROR(DecodePredictInputs(request, *signature, &inputs_));
    filter_.assign(request.output_filter().begin(), request.output_filter().end());
    LS_RETURN_IF_ERROR(CheckOutputFilter(*signature, filter_));
    return RunPredict(runner_, *signature, inputs_, filter_, &outputs_);
  }

  Status MultiInference(const tfs::MultiInferenceRequest& request) {
    LS_RETURN_IF_ERROR(CheckMultiInferenceTasks(request));
    for (const tfs::InferenceTask& task : request.tasks()) {
      LS_ASSIGN_OR_RETURN(const Signature* signature, Find(task.model_spec()));
      tfs::InferenceResult result;
      if (task.method_name() == kClassifyMethod) {
        LS_RETURN_IF_ERROR(RunClassify(runner_, *signature, request.input(), result.mutable_classification_result()));
      } else {
        LS_RETURN_IF_ERROR(RunRegress(runner_, *signature, request.input(), result.mutable_regression_result()));
      }
    }
    return Status::Ok();
  }

  const GraphRunner& runner_;
  std::vector<NamedTensor> inputs_;
  std::vector<NamedTensor> outputs_;
  std::vector<std::string> filter_;
};

}  // namespace

StatusOr<WarmupReplay> ReplayWarmupFile(const ServableHandle& version, int iterations) {
  const std::filesystem::path path = version->dir() / kTfServingWarmupFile;
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  // Cannot tell whether there is a warm-up file: fail rather than serve un-warmed.
  if (ec) return FailedPrecondition("cannot check " + path.string() + ": " + ec.message());
  WarmupReplay replay;
  if (!exists) return replay;
  // As upstream, the file is plain: a gzip-compressed one is not a warm-up file.
  TfRecordReader::Options options;
  options.compression = TfRecordReader::Options::Compression::kNone;
  LS_ASSIGN_OR_RETURN(TfRecordReader reader, TfRecordReader::Open(path.string(), options));
  RequestRecord record;  // the runs' timings, which no metric reads
  const GraphRunner runner{version, &record};
  RecordReplayer replayer(runner);
  std::string bytes;
  tfs::PredictionLog log;
  for (;;) {
    LS_ASSIGN_OR_RETURN(const bool more, reader.Next(&bytes));
    if (!more) break;
    const std::string which = "warm-up record " + std::to_string(replay.records) + " (at byte " +
                              std::to_string(reader.last_offset()) + ") of " + path.string();
    if (replay.records == kMaxTfServingWarmupRecords) {
      return InvalidArgument(path.string() + " holds more than " + std::to_string(kMaxTfServingWarmupRecords) +
                             " records, TensorFlow Serving's limit");
    }
    ++replay.records;
    if (!log.ParseFromString(bytes)) return InvalidArgument(which + " is not a tensorflow.serving.PredictionLog");
    for (int i = 0; i < iterations; ++i) {
      int64_t runs = 0;
      const Status ran = Guarded([&]() -> Status {
        LS_ASSIGN_OR_RETURN(runs, replayer.Run(log));
        return Status::Ok();
      });
      if (!ran.ok()) return ran.WithPrefix(which);
      replay.runs += runs;
    }
  }
  return replay;
}

}  // namespace lockstep
