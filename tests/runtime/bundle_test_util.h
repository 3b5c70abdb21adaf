// Shared by the bundle tests: test models, a scratch directory, and tools to damage a written
// bundle on purpose (rewrite model.pb, recompute the manifest, flip bytes).
#pragma once

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "proto/lockstep/bundle.pb.h"
#include "runtime/bundle/bundle.h"
#include "tests/common/file_util.h"
#include "tests/common/scratch_dir.h"
#include "runtime/bundle/manifest.h"
#include "runtime/bundle/sha256.h"
#include "runtime/graph.h"
#include "runtime/graph_proto.h"

namespace lockstep::testing_util {

namespace fs = std::filesystem;

using ::lockstep::test::ScratchDir;

using ::lockstep::test::ReadFile;
using ::lockstep::test::WriteFile;

inline void FlipByte(const fs::path& path, size_t offset, unsigned char mask = 0x01) {
  std::string bytes = ReadFile(path);
  ASSERT_LT(offset, bytes.size()) << path;
  bytes[offset] = static_cast<char>(static_cast<unsigned char>(bytes[offset]) ^ mask);
  WriteFile(path, bytes);
}

// Every regular file of the bundle except the manifest, as manifest-relative paths.
inline std::vector<std::string> BundleFiles(const fs::path& dir) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::string rel = fs::relative(e.path(), dir).generic_string();
    if (rel != kBundleManifestFile) files.push_back(rel);
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Rewrites MANIFEST.sha256 to match the files now present, so that a damaged file gets past
// the checksum and the check that fires is the structural or semantic one under test.
inline void RecomputeManifest(const fs::path& dir) {
  std::vector<ManifestEntry> entries;
  for (const std::string& rel : BundleFiles(dir)) entries.push_back({Sha256Hex(ReadFile(dir / rel)), rel});
  WriteFile(dir / kBundleManifestFile, FormatManifest(entries));
}

// Parses model.pb, lets `mutate` change it, writes it back and fixes the manifest.
inline void RewriteModel(const fs::path& dir, const std::function<void(proto::BundleDef&)>& mutate) {
  proto::BundleDef def;
  ASSERT_TRUE(def.ParseFromString(ReadFile(dir / kBundleGraphFile)));
  mutate(def);
  std::string bytes;
  ASSERT_TRUE(def.SerializeToString(&bytes));
  WriteFile(dir / kBundleGraphFile, bytes);
  RecomputeManifest(dir);
}

inline proto::NodeDef* FindProtoNode(proto::BundleDef& def, const std::string& name) {
  for (auto& n : *def.mutable_graph()->mutable_nodes()) {
    if (n.name() == name) return &n;
  }
  ADD_FAILURE() << "no node " << name;
  return nullptr;
}

inline proto::WeightEntry* FindProtoWeight(proto::BundleDef& def, const std::string& name) {
  for (auto& w : *def.mutable_weights()) {
    if (w.name() == name) return &w;
  }
  ADD_FAILURE() << "no weight " << name;
  return nullptr;
}

// Checks code and that the message mentions every fragment (what is wrong, and where).
inline ::testing::AssertionResult IsError(const Status& s, StatusCode code,
                                          std::initializer_list<std::string> fragments) {
  if (s.ok()) return ::testing::AssertionFailure() << "expected " << StatusCodeName(code) << ", got OK";
  if (s.code() != code) {
    return ::testing::AssertionFailure() << "expected " << StatusCodeName(code) << ", got " << s.ToString();
  }
  for (const std::string& f : fragments) {
    if (s.message().find(f) == std::string::npos) {
      return ::testing::AssertionFailure() << "message lacks '" << f << "': " << s.ToString();
    }
  }
  return ::testing::AssertionSuccess() << s.ToString();
}

inline NodeDef InputNode(const std::string& name, DType dtype, Shape shape) {
  return {name, "Input", {}, AttrMap{{"dtype", dtype}, {"shape", shape}}};
}

inline NodeDef WeightNode(const std::string& name, const std::string& op, const std::string& weight) {
  return {name, op, {}, AttrMap{{"weight", weight}}};
}

inline TensorBinding Binding(const std::string& key, const std::string& tensor, DType dtype, Shape shape) {
  return {key, tensor, dtype, shape};
}

// Only executor ops (Input, Const), so it does not depend on any kernel library: one weight
// of every dtype, a zero-element weight, every attr type, two signatures and metadata.
inline Model ConstModel() {
  Model m;
  m.weights["w_f32"] = Tensor::FromVector<float>({2, 3}, {1.5f, -2.0f, 0.0f, -0.0f, 3.25f, 1e30f});
  m.weights["w_bf16"] = Tensor::FromVector<bfloat16>(
      {3}, {FloatToBfloat16(1.0f), FloatToBfloat16(-3.5f), bfloat16::FromBits(0x7fc1)});
  m.weights["w_i32"] = Tensor::FromVector<int32_t>({2, 2}, {1, -2, 2147483647, -2147483647 - 1});
  m.weights["w_i64"] = Tensor::FromVector<int64_t>({3}, {int64_t{1} << 62, -1, 0});
  m.weights["w_bool"] = Tensor::FromVector<bool>({5}, {true, false, false, true, true});
  m.weights["w_str"] = Tensor::FromVector<std::string>(
      {2, 2}, {"hello", "", std::string("nul\0byte\n", 9), std::string(300, 'x')});
  m.weights["w_empty"] = Tensor(DType::kFloat32, Shape{0, 4});
  m.weights["w_scalar"] = Tensor::Scalar<int64_t>(42);

  m.graph.nodes.push_back(InputNode("x", DType::kFloat32, Shape{-1, 4}));
  for (const auto& [name, t] : m.weights) {
    m.graph.nodes.push_back(WeightNode("c_" + name.substr(2), name == "w_f32" ? "Variable" : "Const", name));
  }
  NodeDef& attrs_node = m.graph.nodes.back();
  attrs_node.attrs.Set("i", int64_t{-7});
  attrs_node.attrs.Set("f", 0.125);
  attrs_node.attrs.Set("s", std::string("text"));
  attrs_node.attrs.Set("b", true);
  attrs_node.attrs.Set("ints", std::vector<int64_t>{1, -2, 3});
  attrs_node.attrs.Set("no_ints", std::vector<int64_t>{});
  attrs_node.attrs.Set("floats", std::vector<double>{0.5, -1e300});
  attrs_node.attrs.Set("dt", DType::kBFloat16);
  attrs_node.attrs.Set("sh", Shape{-1, 0, 7});
  attrs_node.attrs.Set("scalar_shape", Shape{});

  Signature sig{"serving_default", "tensorflow/serving/predict", {}, {}};
  sig.inputs.push_back(Binding("x", "x", DType::kFloat32, Shape{-1, 4}));
  sig.outputs.push_back(Binding("y", "c_f32", DType::kFloat32, Shape{2, 3}));
  sig.outputs.push_back(Binding("labels", "c_str:0", DType::kString, Shape{2, 2}));
  Signature other{"counts", "", {}, {}};
  other.outputs.push_back(Binding("n", "c_i64", DType::kInt64, Shape{-1}));
  m.graph.signatures = {sig, other};
  m.graph.metadata = {{"author", "bundle_test"}, {"framework", "lockstep"}};
  return m;
}

// x[-1,4] -> MatMul(w[4,3]) -> Add(b[3]) -> y[-1,3]: needs the standard MatMul and Add ops.
inline Model MlpModel() {
  Model m;
  m.weights["w"] = Tensor::FromVector<float>({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  m.weights["b"] = Tensor::FromVector<float>({3}, {0.5f, -0.5f, 1.0f});
  m.graph.nodes.push_back(InputNode("x", DType::kFloat32, Shape{-1, 4}));
  m.graph.nodes.push_back(WeightNode("w", "Variable", "w"));
  m.graph.nodes.push_back(WeightNode("b", "Const", "b"));
  m.graph.nodes.push_back({"mm", "MatMul", {"x", "w"}, AttrMap{{"transpose_a", false}, {"transpose_b", false}}});
  m.graph.nodes.push_back({"y", "Add", {"mm", "b:0"}, {}});
  Signature sig{"serving_default", "tensorflow/serving/predict", {}, {}};
  sig.inputs.push_back(Binding("x", "x", DType::kFloat32, Shape{-1, 4}));
  sig.outputs.push_back(Binding("y", "y", DType::kFloat32, Shape{-1, 3}));
  m.graph.signatures = {sig};
  return m;
}

// Whether `actual` is `expected`: graph, signatures, metadata, and every weight bit for bit.
inline void ExpectSameModel(const Model& expected, const Model& actual) {
  proto::BundleDef a, b;
  GraphToProto(expected.graph, &a);
  GraphToProto(actual.graph, &b);
  // The proto form covers nodes, attrs, signatures (in order) and metadata in one comparison;
  // deterministic serialisation makes map order irrelevant.
  std::string sa, sb;
  {
    google::protobuf::io::StringOutputStream out_a(&sa), out_b(&sb);
    google::protobuf::io::CodedOutputStream ca(&out_a), cb(&out_b);
    ca.SetSerializationDeterministic(true);
    cb.SetSerializationDeterministic(true);
    a.SerializeToCodedStream(&ca);
    b.SerializeToCodedStream(&cb);
  }
  EXPECT_EQ(sa, sb) << "graphs differ:\n" << a.DebugString() << "\nvs\n" << b.DebugString();
  EXPECT_EQ(actual.graph.metadata, expected.graph.metadata);
  ASSERT_EQ(actual.weights.size(), expected.weights.size());
  for (const auto& [name, t] : expected.weights) {
    auto it = actual.weights.find(name);
    ASSERT_NE(it, actual.weights.end()) << name;
    EXPECT_TRUE(it->second.BitwiseEqual(t)) << name << ": " << it->second.DebugString() << " vs " << t.DebugString();
  }
}

// The names in `dir`, sorted.
inline std::vector<std::string> DirEntries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace lockstep::testing_util
