// Running a case laid out as ONNX's backend test suite lays them out (model.onnx beside
// test_data_set_*/input_<i>.pb and output_<k>.pb, serialized TensorProtos): shared by the suite's
// driver (onnx_conformance_test.cc) and the PyTorch exports' test (onnx_pytorch_test.cc).
// Outputs are compared at the suite's tolerances: rtol 1e-3, atol 1e-7.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"
#include "runtime/onnx/onnx_tensor.h"
#include "runtime/session.h"

namespace lockstep::testing_onnx {

inline StatusOr<Tensor> ReadTensorFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  onnx::TensorProto proto;
  if (!proto.ParseFromIstream(&in)) return InvalidArgument(path.string() + ": not a TensorProto");
  return TensorFromOnnx(proto, nullptr);
}

template <typename T>
bool CloseEnough(T got, T want) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::abs(static_cast<double>(got) - static_cast<double>(want)) <= 1e-7 + 1e-3 * std::abs(static_cast<double>(want));
}

// ONNX's test data stores bfloat16 values as UINT16 tensors (its numpy has no bfloat16): the
// same bits, read as `dtype` when that is a 2-byte float.
inline Tensor AsHalfBits(const Tensor& t, DType dtype) {
  if (t.dtype() != DType::kUInt16 || (dtype != DType::kBFloat16 && dtype != DType::kFloat16)) return t;
  Tensor out(dtype, t.shape());
  if (t.byte_size() > 0) std::memcpy(out.mutable_raw_data(), t.raw_data(), t.byte_size());
  return out;
}

// "" when `got` matches `want`, else what differs.
inline std::string Compare(const Tensor& got, const Tensor& want_as_stored) {
  const Tensor want = AsHalfBits(want_as_stored, got.dtype());
  if (got.dtype() != want.dtype()) {
    return "dtype " + std::string(DTypeName(got.dtype())) + ", expected " + std::string(DTypeName(want.dtype()));
  }
  if (!(got.shape() == want.shape())) return "shape " + got.shape().ToString() + ", expected " + want.shape().ToString();
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    bool ok = true;
    switch (got.dtype()) {
      case DType::kFloat32: ok = CloseEnough(got.data<float>()[i], want.data<float>()[i]); break;
      case DType::kFloat64: ok = CloseEnough(got.data<double>()[i], want.data<double>()[i]); break;
      case DType::kFloat16:
        ok = CloseEnough(Float16ToFloat(got.data<float16>()[i]), Float16ToFloat(want.data<float16>()[i]));
        break;
      case DType::kBFloat16: {
        // Within one bfloat16 step (8 significant bits): the suite's data (ONNX 1.12) truncates
        // float32 to bfloat16 where the runtime, as later ONNX releases, rounds to nearest even.
        const float g = Bfloat16ToFloat(got.data<bfloat16>()[i]), w = Bfloat16ToFloat(want.data<bfloat16>()[i]);
        ok = CloseEnough(g, w) || std::abs(g - w) <= std::ldexp(std::abs(w), -7);
        break;
      }
      default: return got.BitwiseEqual(want) ? "" : "values differ: " + got.DebugString(8) + ", expected " + want.DebugString(8);
    }
    if (!ok) return "element " + std::to_string(i) + " differs: " + got.DebugString(8) + ", expected " + want.DebugString(8);
  }
  return "";
}

// The case's test_data_set_* directories, in order.
inline std::vector<std::filesystem::path> TestDataSets(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> sets;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().starts_with("test_data_set_")) sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  return sets;
}

// The data set's inputs, keyed by the session's first signature.
inline StatusOr<std::vector<NamedTensor>> ReadInputs(const Session& session, const std::filesystem::path& set) {
  const Signature& sig = session.signatures()[0];
  std::vector<NamedTensor> inputs;
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    StatusOr<Tensor> t = ReadTensorFile(set / ("input_" + std::to_string(i) + ".pb"));
    if (!t.ok()) return t.status().WithPrefix("test input " + std::to_string(i));
    // A few cases of the suite (castlike's bfloat16 ones) feed a shape their own model's input
    // rules out: the data is at fault, not the run, and the case counts as refused.
    const Shape& declared = sig.inputs[i].shape;
    bool fits = sig.inputs[i].any_shape || declared.rank() == t->shape().rank();
    for (int d = 0; fits && !sig.inputs[i].any_shape && d < declared.rank(); ++d) {
      fits = declared[d] < 0 || declared[d] == t->shape()[d];
    }
    if (!fits) {
      return InvalidArgument("the suite's data for input '" + sig.inputs[i].key + "' has shape " +
                             t->shape().ToString() + " where the case's model declares " + declared.ToString());
    }
    inputs.push_back({sig.inputs[i].key, AsHalfBits(*t, sig.inputs[i].dtype)});
  }
  return inputs;
}

// Runs data set `set` on the session's first signature. An error when a file cannot be read;
// else `diff` is "" when every output matches, or says which differs and how (a failed run
// included).
inline Status RunDataSet(const Session& session, const std::filesystem::path& set, std::string* diff) {
  diff->clear();
  LS_ASSIGN_OR_RETURN(std::vector<NamedTensor> inputs, ReadInputs(session, set));
  std::vector<NamedTensor> outputs;
  const Status run = session.Run(session.signatures()[0].name, inputs, &outputs);
  if (!run.ok()) {
    *diff = "the run failed: " + run.message();
    return Status::Ok();
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    StatusOr<Tensor> want = ReadTensorFile(set / ("output_" + std::to_string(k) + ".pb"));
    if (!want.ok()) return want.status().WithPrefix("expected output " + std::to_string(k));
    const std::string d = Compare(outputs[k].tensor, *want);
    if (!d.empty()) {
      *diff = "output '" + outputs[k].name + "': " + d;
      return Status::Ok();
    }
  }
  return Status::Ok();
}

}  // namespace lockstep::testing_onnx
