// The ONNX backend test suite (Debian's libonnx-testdata: node/, pytorch-converted/,
// pytorch-operator/, simple/), every case: model.onnx is imported and compiled, each
// test_data_set_* is run, and the outputs are compared with the expected ones at the suite's
// tolerances (rtol 1e-3, atol 1e-7). A case is passed, refused (the import or compilation said
// what it does not support), or wrong (an answer that differs, or a run that fails). Wrong
// must be none: Lockstep refuses what it cannot run rather than answer it wrongly.
//
// The table by op is docs/onnx-conformance.md, and this test fails when the file disagrees
// with the run: scripts/onnx-conformance writes it anew (LOCKSTEP_ONNX_REPORT=path).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "onnx/onnx_pb.h"
#include "runtime/onnx/onnx_model.h"
#include "runtime/onnx/onnx_tensor.h"
#include "runtime/session.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

const char* kTestData = "/usr/share/libonnx-testdata/data";
const char* kSuites[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

enum class Verdict { kPassed, kRefused, kWrong };

struct CaseResult {
  std::string suite, name, op;
  Verdict verdict = Verdict::kPassed;
  std::string why;  // refused or wrong: the first line of the reason
};

std::string FirstLine(std::string s) {
  // The message names the file first; the case's name already says which.
  const std::string marker = "model.onnx: ";
  if (auto at = s.find(marker); at != std::string::npos) s = s.substr(at + marker.size());
  if (auto nl = s.find('\n'); nl != std::string::npos) s = s.substr(0, nl);
  for (char& c : s) {
    if (c == '|') c = '/';
  }
  return s.size() > 160 ? s.substr(0, 157) + "..." : s;
}

StatusOr<Tensor> ReadTensorFile(const fs::path& path) {
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

// "" when `got` matches `want`, else what differs.
std::string Compare(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype()) {
    return "dtype " + std::string(DTypeName(got.dtype())) + ", expected " + std::string(DTypeName(want.dtype()));
  }
  if (!(got.shape() == want.shape())) return "shape " + got.shape().ToString() + ", expected " + want.shape().ToString();
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    bool ok = true;
    switch (got.dtype()) {
      case DType::kFloat32: ok = CloseEnough(got.data<float>()[i], want.data<float>()[i]); break;
      case DType::kFloat64: ok = CloseEnough(got.data<double>()[i], want.data<double>()[i]); break;
      default: return got.BitwiseEqual(want) ? "" : "values differ: " + got.DebugString(8) + ", expected " + want.DebugString(8);
    }
    if (!ok) return "element " + std::to_string(i) + " differs: " + got.DebugString(8) + ", expected " + want.DebugString(8);
  }
  return "";
}

// The op a case tests: its one node's op, else the ops of its graph.
std::string CaseOp(const fs::path& dir) {
  std::ifstream in(dir / "model.onnx", std::ios::binary);
  onnx::ModelProto proto;
  if (!proto.ParseFromIstream(&in)) return "(unreadable)";
  std::set<std::string> ops;
  for (const auto& n : proto.graph().node()) ops.insert(n.op_type());
  if (ops.size() == 1) return *ops.begin();
  return dir.filename().string().ends_with("_expanded") ? "(expanded functions)" : "(several ops)";
}

CaseResult RunCase(const std::string& suite, const fs::path& dir) {
  CaseResult r{suite, dir.filename().string(), CaseOp(dir), Verdict::kPassed, ""};
  auto refuse = [&](const Status& s) {
    r.verdict = Verdict::kRefused;
    r.why = FirstLine(s.message());
    return r;
  };
  auto wrong = [&](const std::string& why) {
    r.verdict = Verdict::kWrong;
    r.why = FirstLine(why);
    return r;
  };
  StatusOr<Model> model = ReadOnnxModel(dir);
  if (!model.ok()) return refuse(model.status());
  SessionOptions options;
  options.pool = &ThreadPool::Default();
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(*model), options);
  if (!session.ok()) return refuse(session.status());
  const Signature& sig = (*session)->signatures()[0];
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().starts_with("test_data_set_")) sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  for (const fs::path& set : sets) {
    std::vector<NamedTensor> inputs;
    for (size_t i = 0; i < sig.inputs.size(); ++i) {
      StatusOr<Tensor> t = ReadTensorFile(set / ("input_" + std::to_string(i) + ".pb"));
      if (!t.ok()) return refuse(t.status().WithPrefix("test input " + std::to_string(i)));
      inputs.push_back({sig.inputs[i].key, std::move(*t)});
    }
    std::vector<NamedTensor> outputs;
    Status run = (*session)->Run(sig.name, inputs, &outputs);
    if (!run.ok()) return wrong(set.filename().string() + ": the run failed: " + run.message());
    for (size_t k = 0; k < outputs.size(); ++k) {
      StatusOr<Tensor> want = ReadTensorFile(set / ("output_" + std::to_string(k) + ".pb"));
      if (!want.ok()) return refuse(want.status().WithPrefix("expected output " + std::to_string(k)));
      const std::string diff = Compare(outputs[k].tensor, *want);
      if (!diff.empty()) return wrong(set.filename().string() + " output '" + outputs[k].name + "': " + diff);
    }
  }
  return r;
}

std::string VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPassed: return "passed";
    case Verdict::kRefused: return "refused";
    case Verdict::kWrong: return "WRONG";
  }
  return "";
}

std::string Report(const std::vector<CaseResult>& results) {
  std::ostringstream out;
  out << "# ONNX backend test suite: conformance\n\n"
      << "Every case of Debian's `libonnx-testdata` (ONNX 1.12) run through `model-server`'s reader and runtime,\n"
      << "compared with the expected outputs at the suite's tolerances (rtol 1e-3, atol 1e-7). *Refused* means\n"
      << "the model failed to load with the reason given (an op, attribute or type Lockstep does not run);\n"
      << "*wrong* means an answer that differs or a run that fails, and must stay at zero.\n\n"
      << "Generated by `scripts/onnx-conformance` (the test `OnnxConformanceTest.BackendSuite` fails when this\n"
      << "file and the run disagree).\n\n"
      << "| suite | cases | passed | refused | wrong |\n|---|---:|---:|---:|---:|\n";
  for (const char* suite : kSuites) {
    int n = 0, passed = 0, refused = 0, wrong = 0;
    for (const CaseResult& r : results) {
      if (r.suite != suite) continue;
      ++n;
      passed += r.verdict == Verdict::kPassed;
      refused += r.verdict == Verdict::kRefused;
      wrong += r.verdict == Verdict::kWrong;
    }
    out << "| " << suite << " | " << n << " | " << passed << " | " << refused << " | " << wrong << " |\n";
  }
  // node/: by op, with each distinct reason once.
  struct OpRow {
    int passed = 0, refused = 0, wrong = 0;
    std::set<std::string> why;
  };
  std::map<std::string, OpRow> by_op;
  for (const CaseResult& r : results) {
    if (r.suite != "node") continue;
    OpRow& row = by_op[r.op];
    row.passed += r.verdict == Verdict::kPassed;
    row.refused += r.verdict == Verdict::kRefused;
    row.wrong += r.verdict == Verdict::kWrong;
    if (r.verdict != Verdict::kPassed) row.why.insert(r.name + ": " + r.why);
  }
  out << "\n## node, by op\n\n| op | passed | refused | wrong | why not passed |\n|---|---:|---:|---:|---|\n";
  for (const auto& [op, row] : by_op) {
    std::string why;
    for (const std::string& w : row.why) why += (why.empty() ? "" : "<br>") + w;
    out << "| " << op << " | " << row.passed << " | " << row.refused << " | " << row.wrong << " | " << why << " |\n";
  }
  for (const char* suite : {"pytorch-converted", "pytorch-operator", "simple"}) {
    out << "\n## " << suite << "\n\n| case | result | why |\n|---|---|---|\n";
    for (const CaseResult& r : results) {
      if (r.suite == suite) out << "| " << r.name << " | " << VerdictName(r.verdict) << " | " << r.why << " |\n";
    }
  }
  return out.str();
}

TEST(OnnxConformanceTest, BackendSuite) {
  ASSERT_TRUE(fs::is_directory(kTestData)) << kTestData << " is missing: scripts/install-deps installs libonnx-testdata";
  std::vector<CaseResult> results;
  for (const char* suite : kSuites) {
    std::vector<fs::path> cases;
    for (const auto& e : fs::directory_iterator(fs::path(kTestData) / suite)) {
      if (fs::is_regular_file(e.path() / "model.onnx")) cases.push_back(e.path());
    }
    std::sort(cases.begin(), cases.end());
    for (const fs::path& dir : cases) results.push_back(RunCase(suite, dir));
  }
  std::map<std::string, int> passed;
  for (const CaseResult& r : results) {
    EXPECT_NE(r.verdict, Verdict::kWrong) << r.suite << "/" << r.name << ": " << r.why;
    passed[r.suite] += r.verdict == Verdict::kPassed;
  }
  const std::string report = Report(results);
  if (const char* path = std::getenv("LOCKSTEP_ONNX_REPORT")) {
    std::ofstream(path) << report;
    return;
  }
  std::ifstream committed(fs::path(LOCKSTEP_SOURCE_DIR) / "docs" / "onnx-conformance.md");
  std::stringstream text;
  text << committed.rdbuf();
  EXPECT_EQ(text.str(), report) << "docs/onnx-conformance.md is out of date: run scripts/onnx-conformance";
}

}  // namespace
}  // namespace lockstep
