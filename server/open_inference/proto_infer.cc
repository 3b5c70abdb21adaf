#include "server/open_inference/proto_infer.h"

#include <type_traits>
#include <utility>

#include "runtime/bfloat16.h"
#include "server/open_inference/datatype.h"

namespace lockstep::open_inference {

namespace {

// Copies `values` (a typed contents field) into a tensor of `dtype` and `shape`, converting
// each element with `convert`.
template <typename T, typename Field, typename Convert>
Status CopyContents(std::string_view input, std::string_view field_name, const Field& values, const Shape& shape,
                    Convert convert, Tensor* tensor) {
  const int64_t count = shape.num_elements();
  if (values.size() != count) {
    return InvalidArgument("input '" + std::string(input) + "': " + std::to_string(values.size()) + " values in " +
                           std::string(field_name) + ", but shape " + shape.ToString() + " takes " +
                           std::to_string(count));
  }
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    for (int64_t i = 0; i < count; ++i) {
      if (!std::in_range<T>(values[static_cast<int>(i)])) {
        return InvalidArgument("input '" + std::string(input) + "': value " +
                               std::to_string(values[static_cast<int>(i)]) + " of " + std::string(field_name) +
                               " does not fit " + std::string(DatatypeName(DTypeOf<T>::value)));
      }
    }
  }
  if (!tensor->Writable(DTypeOf<T>::value, shape)) *tensor = Tensor(DTypeOf<T>::value, shape);
  std::span<T> out = tensor->mutable_data<T>();
  for (int64_t i = 0; i < count; ++i) out[i] = convert(values[static_cast<int>(i)]);
  return Status::Ok();
}

// A widened integer of the typed contents, range-checked by CopyContents.
template <typename T>
constexpr auto Narrowed = [](auto v) { return static_cast<T>(v); };

// The typed contents of `contents` for an input of `dtype`.
Status TensorFromContents(std::string_view input, DType dtype, const Shape& shape,
                          const inference::InferTensorContents& contents, Tensor* tensor) {
  auto same = [](auto v) { return v; };
  switch (dtype) {
    case DType::kFloat32:
      return CopyContents<float>(input, "fp32_contents", contents.fp32_contents(), shape, same, tensor);
    case DType::kFloat64:
      return CopyContents<double>(input, "fp64_contents", contents.fp64_contents(), shape, same, tensor);
    case DType::kInt32:
      return CopyContents<int32_t>(input, "int_contents", contents.int_contents(), shape, same, tensor);
    case DType::kInt64:
      return CopyContents<int64_t>(input, "int64_contents", contents.int64_contents(), shape, same, tensor);
    case DType::kBool:
      return CopyContents<bool>(input, "bool_contents", contents.bool_contents(), shape, same, tensor);
    case DType::kString: {
      const auto& values = contents.bytes_contents();
      if (values.size() != shape.num_elements()) {
        return InvalidArgument("input '" + std::string(input) + "': " + std::to_string(values.size()) +
                               " values in bytes_contents, but shape " + shape.ToString() + " takes " +
                               std::to_string(shape.num_elements()));
      }
      *tensor = Tensor(DType::kString, shape);
      std::span<std::string> out = tensor->mutable_data<std::string>();
      for (int i = 0; i < values.size(); ++i) out[static_cast<size_t>(i)] = values[i];
      return Status::Ok();
    }
    // The protocol's narrow integers travel widened, in int_contents and uint_contents.
    case DType::kUInt8:
      return CopyContents<uint8_t>(input, "uint_contents", contents.uint_contents(), shape, Narrowed<uint8_t>, tensor);
    case DType::kInt8:
      return CopyContents<int8_t>(input, "int_contents", contents.int_contents(), shape, Narrowed<int8_t>, tensor);
    case DType::kUInt16:
      return CopyContents<uint16_t>(input, "uint_contents", contents.uint_contents(), shape, Narrowed<uint16_t>, tensor);
    case DType::kInt16:
      return CopyContents<int16_t>(input, "int_contents", contents.int_contents(), shape, Narrowed<int16_t>, tensor);
    case DType::kUInt32:
      return CopyContents<uint32_t>(input, "uint_contents", contents.uint_contents(), shape, same, tensor);
    case DType::kUInt64:
      return CopyContents<uint64_t>(input, "uint64_contents", contents.uint64_contents(), shape,
                                    [](uint64_t v) { return static_cast<uint64_t>(v); }, tensor);
    case DType::kBFloat16:
    case DType::kFloat16:
      return InvalidArgument("input '" + std::string(input) + "': " + std::string(DatatypeName(dtype)) +
                             " has no typed contents; send it in raw_input_contents");
    case DType::kInvalid:
      break;
  }
  return Internal("unhandled dtype");
}

}  // namespace

Status ReadInferRequest(const inference::ModelInferRequest& message, InferRequest* request) {
  request->id = message.id();
  if (const auto it = message.parameters().find("signature_name"); it != message.parameters().end()) {
    if (it->second.parameter_choice_case() != inference::InferParameter::kStringParam) {
      return InvalidArgument("parameter 'signature_name' must be a string_param");
    }
    request->signature_name = it->second.string_param();
  }
  for (const auto& output : message.outputs()) request->AddOutput().name = output.name();
  const bool raw = message.raw_input_contents_size() > 0;
  if (raw && message.raw_input_contents_size() != message.inputs_size()) {
    return InvalidArgument("raw_input_contents has " + std::to_string(message.raw_input_contents_size()) +
                           " entries for " + std::to_string(message.inputs_size()) +
                           " inputs: a request sends all its inputs raw, or none");
  }
  Shape shape;
  for (int i = 0; i < message.inputs_size(); ++i) {
    const auto& input = message.inputs(i);
    NamedTensor& decoded = request->AddInput(input.name());
    LS_ASSIGN_OR_RETURN(const DType dtype, InputDType(input.name(), input.datatype()));
    if (raw) {
      const std::string& bytes = message.raw_input_contents(i);
      // Raw contents take at least a byte per element.
      LS_RETURN_IF_ERROR(ShapeFromDims(input.name(), input.shape(), static_cast<int64_t>(bytes.size()), &shape));
      LS_RETURN_IF_ERROR(TakeTensorBytes(input.name(), dtype, shape, request));
      LS_RETURN_IF_ERROR(TensorFromRawContents(input.name(), dtype, shape, bytes, &decoded.tensor));
      continue;
    }
    if (!input.has_contents()) {
      return InvalidArgument("input '" + input.name() + "' has no contents and the request no raw_input_contents");
    }
    // The contents' count must equal the shape's, checked before any tensor is made.
    LS_RETURN_IF_ERROR(ShapeFromDims(input.name(), input.shape(), Shape::kMaxElements, &shape));
    LS_RETURN_IF_ERROR(TakeTensorBytes(input.name(), dtype, shape, request));
    LS_RETURN_IF_ERROR(TensorFromContents(input.name(), dtype, shape, input.contents(), &decoded.tensor));
  }
  return Status::Ok();
}

void WriteInferResponse(std::string_view model, int64_t version, std::string_view id,
                        std::span<const AnsweredOutput> outputs, inference::ModelInferResponse* response) {
  // assign() keeps the pooled response's strings, where a set_ of a temporary would replace them.
  response->mutable_model_name()->assign(model);
  response->mutable_model_version()->assign(std::to_string(version));
  response->mutable_id()->assign(id);
  response->mutable_parameters()->clear();
  const int n = static_cast<int>(outputs.size());
  auto* tensors = response->mutable_outputs();
  auto* raw = response->mutable_raw_output_contents();
  if (tensors->size() > n) tensors->DeleteSubrange(n, tensors->size() - n);
  if (raw->size() > n) raw->DeleteSubrange(n, raw->size() - n);
  for (int i = 0; i < n; ++i) {
    const NamedTensor& output = *outputs[static_cast<size_t>(i)].output;
    auto* tensor = i < tensors->size() ? tensors->Mutable(i) : tensors->Add();
    tensor->set_name(output.name);
    tensor->set_datatype(std::string(DatatypeName(output.tensor.dtype())));
    tensor->clear_shape();
    for (const int64_t dim : output.tensor.shape().dims()) tensor->add_shape(dim);
    tensor->mutable_parameters()->clear();
    tensor->clear_contents();
    std::string* bytes = i < raw->size() ? raw->Mutable(i) : raw->Add();
    bytes->clear();
    bytes->reserve(RawByteSize(output.tensor));
    AppendRawContents(output.tensor, bytes);
  }
}

}  // namespace lockstep::open_inference
