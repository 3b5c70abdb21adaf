#include "server/inference.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "runtime/bfloat16.h"
#include "runtime/saved_model/tensor_proto.h"

namespace lockstep {

namespace tfs = tensorflow::serving;

StatusOr<ServableRequest> ServableRequestFromSpec(const tfs::ModelSpec& spec) {
  if (spec.name().empty()) return InvalidArgument("Missing model name in request.");
  ServableRequest request;
  request.model = spec.name();
  if (spec.has_version()) request.version = spec.version().value();
  if (spec.version_choice_case() == tfs::ModelSpec::kVersionLabel) request.label = spec.version_label();
  request.signature_name = spec.signature_name();
  return request;
}

StatusOr<ServableHandle> ResolveServable(const ModelManager& manager, const ServableRequest& request) {
  return manager.Resolve(request.model, request.version, request.label, request.routing_key);
}

StatusOr<const Signature*> FindServingSignature(const Session& session, std::string_view name) {
  if (name.empty()) name = kDefaultSignature;
  const Signature* signature = session.FindSignature(name);
  if (signature == nullptr) {
    return InvalidArgument("Serving signature name: \"" + std::string(name) + "\" not found in signature def");
  }
  return signature;
}

Status CheckMultiInferenceTasks(const tfs::MultiInferenceRequest& request) {
  if (request.tasks_size() == 0) return InvalidArgument("Expected at least one task");
  std::set<std::string> signatures;
  for (const tfs::InferenceTask& task : request.tasks()) {
    if (task.model_spec().name() != request.tasks(0).model_spec().name()) {
      return InvalidArgument("All ModelSpecs in a MultiInferenceRequest must access the same model name.");
    }
    const std::string& name = task.model_spec().signature_name();
    if (!signatures.insert(name.empty() ? std::string(kDefaultSignature) : name).second) {
      return InvalidArgument("Duplicate evaluation of signature: " + name);
    }
    if (task.method_name() != kClassifyMethod && task.method_name() != kRegressMethod) {
      return Unimplemented("Unsupported signature method_name: " + task.method_name());
    }
  }
  return Status::Ok();
}

void FillServedSpec(const LoadedVersion& servable, std::string_view signature_name, tfs::ModelSpec* spec) {
  spec->set_name(servable.model());
  spec->mutable_version()->set_value(servable.version());
  const std::string_view signature = signature_name.empty() ? kDefaultSignature : signature_name;
  spec->set_signature_name(signature.data(), signature.size());  // into the spec's own string
}

Status GraphRunner::Run(const Signature& signature, std::span<const NamedTensor> inputs,
                        std::vector<NamedTensor>* outputs) const {
  if (batching != nullptr) {
    BatchScheduler::Timing timing;
    Status status = batching->Run(servable, signature, inputs, outputs, deadline, &timing);
    record->queue_seconds += timing.queue_seconds;
    record->compute_seconds += timing.compute_seconds;
    return status;
  }
  const auto start = std::chrono::steady_clock::now();
  Status status = servable->session().Run(signature.name, inputs, outputs);
  record->compute_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return status;
}

void GraphRunner::Start(const Signature& signature, std::span<const NamedTensor> inputs,
                        std::vector<NamedTensor>* outputs, BatchTask* task) const {
  if (batching != nullptr) {
    batching->Submit(servable, signature, inputs, outputs, deadline, task);
  } else {
    BatchScheduler::RunNow(servable->session(), signature, inputs, outputs, task);
  }
}

void RecordBatchTiming(const BatchTask& task, RequestRecord* record) {
  record->queue_seconds += task.timing().queue_seconds;
  record->compute_seconds += task.timing().compute_seconds;
}

bool KeepCallTensors(std::span<const NamedTensor> inputs, std::span<const NamedTensor> outputs) {
  constexpr size_t kKeptBytes = size_t{1} << 20;
  size_t total = 0;
  for (const NamedTensor& t : inputs) total += t.tensor.byte_size();
  for (const NamedTensor& t : outputs) total += t.tensor.byte_size();
  return total <= kKeptBytes;
}

Status CheckOutputFilter(const Signature& signature, std::span<const std::string> output_filter) {
  for (size_t i = 0; i < output_filter.size(); ++i) {
    const std::string& key = output_filter[i];
    const bool known = std::any_of(signature.outputs.begin(), signature.outputs.end(),
                                   [&](const TensorBinding& b) { return b.key == key; });
    if (!known) {
      std::string expected;
      for (const TensorBinding& b : signature.outputs) expected += (expected.empty() ? "" : ", ") + b.key;
      return InvalidArgument("output tensor alias not found in signature: " + key +
                             " Outputs expected to be in the set {" + expected + "}.");
    }
    if (std::find(output_filter.begin(), output_filter.begin() + i, key) != output_filter.begin() + i) {
      return InvalidArgument("duplicate output tensor alias in output_filter: " + key);
    }
  }
  return Status::Ok();
}

void ApplyOutputFilter(std::span<const std::string> output_filter, std::vector<NamedTensor>* outputs) {
  if (output_filter.empty()) return;
  std::vector<NamedTensor> all = std::move(*outputs);
  outputs->clear();
  for (const std::string& key : output_filter) {
    auto it = std::find_if(all.begin(), all.end(), [&](const NamedTensor& t) { return t.name == key; });
    outputs->push_back(std::move(*it));
  }
}

Status RunPredict(const GraphRunner& runner, const Signature& signature, std::span<const NamedTensor> inputs,
                  std::span<const std::string> output_filter, std::vector<NamedTensor>* outputs) {
  // Checked before running, so that a typo costs nothing.
  LS_RETURN_IF_ERROR(CheckOutputFilter(signature, output_filter));
  LS_RETURN_IF_ERROR(runner.Run(signature, inputs, outputs));
  ApplyOutputFilter(output_filter, outputs);
  return Status::Ok();
}

namespace {

Status CheckMethod(const Signature& signature, std::string_view expected, std::string_view what) {
  if (signature.method_name == expected) return Status::Ok();
  return InvalidArgument("Expected " + std::string(what) + " signature method_name to be " + std::string(expected) +
                         ". Was: " + signature.method_name);
}

struct ExampleView {
  const google::protobuf::RepeatedPtrField<tensorflow::Example>* examples = nullptr;
  const tensorflow::Example* context = nullptr;
};

StatusOr<ExampleView> ExamplesOf(const tfs::Input& input) {
  ExampleView view;
  switch (input.kind_case()) {
    case tfs::Input::kExampleList:
      view.examples = &input.example_list().examples();
      break;
    case tfs::Input::kExampleListWithContext:
      view.examples = &input.example_list_with_context().examples();
      if (input.example_list_with_context().has_context()) view.context = &input.example_list_with_context().context();
      break;
    default: return InvalidArgument("Input is empty.");
  }
  if (view.examples->empty()) return InvalidArgument("Input is empty.");
  return view;
}

// The feature `key` of one example, or of the context when the example lacks it.
const tensorflow::Feature* FindFeature(const ExampleView& view, size_t index, const std::string& key) {
  const auto& own = (*view.examples)[static_cast<int>(index)].features().feature();
  if (auto it = own.find(key); it != own.end()) return &it->second;
  if (view.context != nullptr) {
    const auto& shared = view.context->features().feature();
    if (auto it = shared.find(key); it != shared.end()) return &it->second;
  }
  return nullptr;
}

// Copies one example's feature values into `out` at element offset `at`.
Status CopyFeature(const tensorflow::Feature& feature, const TensorBinding& binding, size_t index,
                   int64_t per_example, Tensor& out) {
  auto count_error = [&](int64_t got) {
    return InvalidArgument("example " + std::to_string(index) + ": feature '" + binding.key + "' has " +
                           std::to_string(got) + " values; the signature wants " + std::to_string(per_example));
  };
  auto kind_error = [&](std::string_view want) {
    return InvalidArgument("example " + std::to_string(index) + ": feature '" + binding.key + "' must be a " +
                           std::string(want) + " for " + std::string(DTypeName(binding.dtype)) + " input");
  };
  const int64_t at = static_cast<int64_t>(index) * per_example;
  switch (binding.dtype) {
    case DType::kFloat32:
    case DType::kBFloat16: {
      // Whole numbers arrive as int64_list (a JSON 2 rather than 2.0); they are taken as floats.
      if (feature.kind_case() == tensorflow::Feature::kInt64List) {
        const auto& values = feature.int64_list().value();
        if (values.size() != per_example) return count_error(values.size());
        for (int64_t i = 0; i < per_example; ++i) {
          const float f = static_cast<float>(values[i]);
          if (binding.dtype == DType::kFloat32) out.mutable_data<float>()[at + i] = f;
          else out.mutable_data<bfloat16>()[at + i] = FloatToBfloat16(f);
        }
        return Status::Ok();
      }
      if (feature.kind_case() != tensorflow::Feature::kFloatList) return kind_error("float_list or int64_list");
      const auto& values = feature.float_list().value();
      if (values.size() != per_example) return count_error(values.size());
      if (binding.dtype == DType::kFloat32) {
        std::copy(values.begin(), values.end(), out.mutable_data<float>().begin() + at);
      } else {
        for (int64_t i = 0; i < per_example; ++i) out.mutable_data<bfloat16>()[at + i] = FloatToBfloat16(values[i]);
      }
      return Status::Ok();
    }
    case DType::kInt32:
    case DType::kInt64: {
      if (feature.kind_case() != tensorflow::Feature::kInt64List) return kind_error("int64_list");
      const auto& values = feature.int64_list().value();
      if (values.size() != per_example) return count_error(values.size());
      for (int64_t i = 0; i < per_example; ++i) {
        const int64_t v = values[i];
        if (binding.dtype == DType::kInt64) {
          out.mutable_data<int64_t>()[at + i] = v;
        } else if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
          return InvalidArgument("example " + std::to_string(index) + ": feature '" + binding.key + "' value " +
                                 std::to_string(v) + " does not fit int32");
        } else {
          out.mutable_data<int32_t>()[at + i] = static_cast<int32_t>(v);
        }
      }
      return Status::Ok();
    }
    case DType::kString: {
      if (feature.kind_case() != tensorflow::Feature::kBytesList) return kind_error("bytes_list");
      const auto& values = feature.bytes_list().value();
      if (values.size() != per_example) return count_error(values.size());
      for (int64_t i = 0; i < per_example; ++i) out.mutable_data<std::string>()[at + i] = values[i];
      return Status::Ok();
    }
    default:
      return InvalidArgument("input '" + binding.key + "' has dtype " + std::string(DTypeName(binding.dtype)) +
                             ", which tf.Example features cannot carry");
  }
}

const NamedTensor* FindOutput(const std::vector<NamedTensor>& outputs, std::string_view key) {
  for (const NamedTensor& t : outputs) {
    if (t.name == key) return &t;
  }
  return nullptr;
}

// Rows x columns of a [N] or [N, C] output, or an error naming it.
StatusOr<int64_t> ColumnsOf(const NamedTensor& output, int64_t rows, int64_t max_columns) {
  const Shape& s = output.tensor.shape();
  const bool shaped = (s.rank() == 1 && s[0] == rows) || (s.rank() == 2 && s[0] == rows && s[1] <= max_columns);
  if (!shaped) {
    return InvalidArgument("output '" + output.name + "' has shape " + s.ToString() + "; expected [" +
                           std::to_string(rows) + "] or [" + std::to_string(rows) +
                           (max_columns == 1 ? ", 1]" : ", classes]"));
  }
  return s.rank() == 1 ? 1 : s[1];
}

}  // namespace

bool TakesSerializedExamples(const Signature& signature) {
  return signature.inputs.size() == 1 && signature.inputs[0].any_shape &&
         signature.inputs[0].dtype == DType::kString && signature.inputs[0].shape.rank() == 1;
}

StatusOr<std::vector<NamedTensor>> TensorsFromExamples(const Signature& signature, const tfs::Input& input) {
  LS_ASSIGN_OR_RETURN(const ExampleView view, ExamplesOf(input));
  const int64_t n = view.examples->size();
  if (TakesSerializedExamples(signature)) {
    // As TF Serving feeds them: a context is serialized in front of each example, and parsing
    // the concatenation merges the two, the example's features winning.
    const std::string context = view.context != nullptr ? view.context->SerializeAsString() : std::string();
    // The context is copied into every example: a large one times many small examples must
    // not make a small request take the machine's memory.
    uint64_t total = 0;
    for (const tensorflow::Example& example : *view.examples) total += context.size() + example.ByteSizeLong();
    if (total > static_cast<uint64_t>(kMaxRequestTensorBytes)) {
      return ResourceExhausted("the examples serialized with their context would take " + std::to_string(total) +
                               " bytes, more than the " + std::to_string(kMaxRequestTensorBytes) +
                               " one request's tensors may");
    }
    Tensor serialized(DType::kString, Shape{n});
    for (int64_t i = 0; i < n; ++i) {
      std::string& bytes = serialized.mutable_data<std::string>()[static_cast<size_t>(i)];
      bytes = context;
      (*view.examples)[static_cast<int>(i)].AppendToString(&bytes);
    }
    std::vector<NamedTensor> tensors;
    tensors.push_back({signature.inputs[0].key, std::move(serialized)});
    return tensors;
  }
  std::vector<NamedTensor> tensors;
  tensors.reserve(signature.inputs.size());
  for (const TensorBinding& binding : signature.inputs) {
    // The per-example shape is the signature's shape without its batch dimension.
    if (binding.shape.rank() < 1) {
      return InvalidArgument("input '" + binding.key + "' of signature '" + signature.name +
                             "' has no batch dimension, so it cannot take examples");
    }
    std::vector<int64_t> dims(binding.shape.dims().begin(), binding.shape.dims().end());
    dims[0] = n;
    int64_t per_example = 1;
    for (size_t i = 1; i < dims.size(); ++i) {
      if (dims[i] < 0) {
        return InvalidArgument("input '" + binding.key + "' of signature '" + signature.name +
                               "' has a variable inner dimension, so examples cannot fill it");
      }
      per_example *= dims[i];
    }
    LS_ASSIGN_OR_RETURN(const Shape shape, Shape::FromDims(dims));
    Tensor tensor(binding.dtype, shape);
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      const tensorflow::Feature* feature = FindFeature(view, i, binding.key);
      if (feature == nullptr) {
        return InvalidArgument("example " + std::to_string(i) + " has no feature '" + binding.key +
                               "' (nor has the context)");
      }
      LS_RETURN_IF_ERROR(CopyFeature(*feature, binding, i, per_example, tensor));
    }
    tensors.push_back({binding.key, std::move(tensor)});
  }
  return tensors;
}

namespace {

// The method a signature must have to give a result, and its name in TF Serving's messages.
struct ResultMethod {
  std::string_view method;
  std::string_view what;
};
ResultMethod MethodFor(const tfs::ClassificationResult*) { return {kClassifyMethod, "classification"}; }
ResultMethod MethodFor(const tfs::RegressionResult*) { return {kRegressMethod, "regression"}; }

// Checks the method and decodes the examples for `signature`, which is to fill `result`: its
// inputs and how many examples.
template <typename Result>
Status PrepareExamples(const Signature& signature, const tfs::Input& input, const Result* result,
                       std::vector<NamedTensor>* inputs, int64_t* num_examples) {
  const ResultMethod method = MethodFor(result);
  LS_RETURN_IF_ERROR(CheckMethod(signature, method.method, method.what));
  LS_ASSIGN_OR_RETURN(*inputs, TensorsFromExamples(signature, input));
  *num_examples = inputs->empty() ? 0 : inputs->front().tensor.shape()[0];
  return Status::Ok();
}

// A classification signature's outputs for `n` examples, as TF Serving's result.
Status ResultFromOutputs(const Signature& signature, const std::vector<NamedTensor>& outputs, int64_t n,
                         tfs::ClassificationResult* result) {
  const NamedTensor* scores = FindOutput(outputs, "scores");
  const NamedTensor* classes = FindOutput(outputs, "classes");
  if (scores == nullptr && classes == nullptr) {
    return InvalidArgument("classification signature '" + signature.name +
                           "' has neither a 'scores' nor a 'classes' output");
  }
  if (scores != nullptr && scores->tensor.dtype() != DType::kFloat32) {
    return InvalidArgument("output 'scores' must be float32, not " + std::string(DTypeName(scores->tensor.dtype())));
  }
  if (classes != nullptr && classes->tensor.dtype() != DType::kString) {
    return InvalidArgument("output 'classes' must be string, not " + std::string(DTypeName(classes->tensor.dtype())));
  }
  constexpr int64_t kAnyWidth = std::numeric_limits<int64_t>::max();
  int64_t columns = 0;
  if (scores != nullptr) {
    LS_ASSIGN_OR_RETURN(columns, ColumnsOf(*scores, n, kAnyWidth));
  }
  if (classes != nullptr) {
    LS_ASSIGN_OR_RETURN(const int64_t class_columns, ColumnsOf(*classes, n, kAnyWidth));
    if (scores != nullptr && class_columns != columns) {
      return InvalidArgument("outputs 'classes' and 'scores' disagree on the number of classes: " +
                             std::to_string(class_columns) + " vs " + std::to_string(columns));
    }
    columns = class_columns;
  }
  result->Clear();
  for (int64_t row = 0; row < n; ++row) {
    tfs::Classifications* classifications = result->add_classifications();
    for (int64_t c = 0; c < columns; ++c) {
      tfs::Class* cls = classifications->add_classes();
      if (classes != nullptr) cls->set_label(classes->tensor.data<std::string>()[row * columns + c]);
      if (scores != nullptr) cls->set_score(scores->tensor.data<float>()[row * columns + c]);
    }
  }
  return Status::Ok();
}

// A regression signature's outputs for `n` examples, as TF Serving's result.
Status ResultFromOutputs(const Signature& signature, const std::vector<NamedTensor>& outputs, int64_t n,
                         tfs::RegressionResult* result) {
  const NamedTensor* values = FindOutput(outputs, "outputs");
  if (values == nullptr) {
    return InvalidArgument("regression signature '" + signature.name + "' has no 'outputs' output");
  }
  if (values->tensor.dtype() != DType::kFloat32) {
    return InvalidArgument("output 'outputs' must be float32, not " + std::string(DTypeName(values->tensor.dtype())));
  }
  LS_RETURN_IF_ERROR(ColumnsOf(*values, n, 1).status());
  result->Clear();
  for (int64_t row = 0; row < n; ++row) result->add_regressions()->set_value(values->tensor.data<float>()[row]);
  return Status::Ok();
}

// Runs `signature` on `input`'s examples and waits: its outputs become `result`.
template <typename Result>
Status RunOnExamples(const GraphRunner& runner, const Signature& signature, const tfs::Input& input,
                     Result* result) {
  std::vector<NamedTensor> inputs, outputs;
  int64_t n = 0;
  LS_RETURN_IF_ERROR(PrepareExamples(signature, input, result, &inputs, &n));
  LS_RETURN_IF_ERROR(runner.Run(signature, inputs, &outputs));
  return ResultFromOutputs(signature, outputs, n, result);
}

}  // namespace

Status RunClassify(const GraphRunner& runner, const Signature& signature, const tfs::Input& input,
                   tfs::ClassificationResult* result) {
  return RunOnExamples(runner, signature, input, result);
}

Status RunRegress(const GraphRunner& runner, const Signature& signature, const tfs::Input& input,
                  tfs::RegressionResult* result) {
  return RunOnExamples(runner, signature, input, result);
}

void ExamplesRun::Begin(const tfs::Input& input) {
  input_ = &input;
  tasks_.clear();
  next_ = 0;
}

void ExamplesRun::AddClassify(const Signature& signature, tfs::ClassificationResult* result) {
  tasks_.push_back({&signature, result, nullptr});
}

void ExamplesRun::AddRegress(const Signature& signature, tfs::RegressionResult* result) {
  tasks_.push_back({&signature, nullptr, result});
}

bool ExamplesRun::Continue(const GraphRunner& runner, BatchTask* task, Status* status) {
  if (!status->ok() || next_ == tasks_.size()) return false;
  *status = Guarded([&] {
    const Task& next = tasks_[next_];
    return next.classification != nullptr
               ? PrepareExamples(*next.signature, *input_, next.classification, &inputs_, &num_examples_)
               : PrepareExamples(*next.signature, *input_, next.regression, &inputs_, &num_examples_);
  });
  if (!status->ok()) return false;
  runner.Start(*tasks_[next_].signature, inputs_, &outputs_, task);
  return true;
}

Status ExamplesRun::Finished(const Status& status) {
  const Task& done = tasks_[next_++];
  Status read = status;
  if (read.ok()) {
    read = done.classification != nullptr
               ? ResultFromOutputs(*done.signature, outputs_, num_examples_, done.classification)
               : ResultFromOutputs(*done.signature, outputs_, num_examples_, done.regression);
  }
  // The examples' tensors are this task's alone.
  inputs_.clear();
  outputs_.clear();
  return read;
}

}  // namespace lockstep
