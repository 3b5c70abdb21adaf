// The fast predict-body reader against the DOM path it stands in for: the bodies clients send
// most are read on the fast path, and whatever it accepts, the DOM path accepts too with the
// same tensors bit for bit (the float32 rounding and its largest-float rule, -0, float64);
// everything else it declines, so the DOM path's errors stay the server's. The same property
// is checked on a few thousand mutations of valid bodies.
#include "server/predict_body_reader.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "server/rest_json.h"

namespace lockstep {
namespace {

TensorBinding Input(std::string key, DType dtype, Shape shape) {
  TensorBinding b;
  b.key = key;
  b.tensor = std::move(key);
  b.dtype = dtype;
  b.shape = shape;
  return b;
}

Signature Sig(std::vector<TensorBinding> inputs) {
  Signature s;
  s.name = std::string(kDefaultSignature);
  s.inputs = std::move(inputs);
  return s;
}

// What the DOM path reads from `body`, or its error.
StatusOr<std::vector<NamedTensor>> Dom(std::string_view body, const Signature& signature, bool* row_format) {
  LS_ASSIGN_OR_RETURN(const PredictBody parsed, ParsePredictBody(body));
  *row_format = parsed.row_format;
  return DecodePredictInputs(parsed, signature);
}

// Reads `body` on the fast path; if it accepts, the DOM path must accept it with the same
// tensors, form and signature name. Returns whether the fast path accepted.
bool FastAgreesWithDom(PredictBodyReader& reader, std::string_view body, const Signature& signature) {
  std::vector<NamedTensor> fast;
  if (!reader.Start(body) || !reader.DecodeInputs(signature, &fast)) return false;
  bool row_format = false;
  StatusOr<std::vector<NamedTensor>> dom = Dom(body, signature, &row_format);
  EXPECT_TRUE(dom.ok()) << "the fast path accepted what the DOM path refuses: " << body << "\n"
                        << dom.status().ToString();
  if (!dom.ok()) return true;
  EXPECT_EQ(reader.row_format(), row_format) << body;
  StatusOr<PredictBody> parsed = ParsePredictBody(body);
  EXPECT_EQ(reader.signature_name(), parsed->signature_name) << body;
  EXPECT_EQ(fast.size(), dom->size()) << body;
  for (size_t i = 0; i < std::min(fast.size(), dom->size()); ++i) {
    EXPECT_EQ(fast[i].name, (*dom)[i].name) << body;
    EXPECT_TRUE(fast[i].tensor.BitwiseEqual((*dom)[i].tensor))
        << body << "\nfast: " << fast[i].tensor.DebugString() << "\ndom: " << (*dom)[i].tensor.DebugString();
  }
  return true;
}

TEST(PredictBodyReaderTest, ReadsTheCommonFormsAsTheDomPathDoes) {
  const Signature one = Sig({Input("x", DType::kFloat32, Shape{-1, 3})});
  const Signature wide = Sig({Input("x", DType::kFloat64, Shape{-1, 2})});
  const Signature two = Sig({Input("a", DType::kFloat32, Shape{-1}), Input("b", DType::kFloat64, Shape{-1, 2})});
  PredictBodyReader reader;  // one reader for all: each body must leave it reusable
  for (const std::string body : {
           R"({"instances": [[1, 2.5, -3e2], [0.1, 1e-7, 16777217]]})",
           R"({"signature_name": "serving_default", "instances": [[1, 2, 3]]})",
           R"({"instances": [[1, 2, 3]], "signature_name": "serving_default"})",
           R"(  {"inputs": [[1, 2, 3], [4, 5, 6]]}  )",
           R"({"inputs": {"x": [[-0, -0.0, 0e0]]}})",
           R"({"instances": [[3.4028235e+38, -3.4028235e+38, 3.40282356e38]]})",  // FLT_MAX rule
           R"({"instances": [[1.00000005960464477539, 0.1, 16777217.000000001]]})",
           R"({"inputs": 7})",
           R"({"inputs": []})",
       }) {
    EXPECT_TRUE(FastAgreesWithDom(reader, body, one)) << "declined: " << body;
  }
  EXPECT_TRUE(FastAgreesWithDom(reader, R"({"instances": [[1e308, -0], [5e-324, 0.1]]})", wide));
  // Numbers shorter than the reader's first guess at their count (one per 8 bytes): read again.
  const Signature flat = Sig({Input("x", DType::kFloat32, Shape{-1})});
  std::string zeros = R"({"instances": [0)";
  for (int i = 1; i < 3000; ++i) zeros += ",1";
  zeros += "]}";
  EXPECT_TRUE(FastAgreesWithDom(reader, zeros, flat));
  // Past kMaxBodyBytes the DOM path reads it, and the reader reads small bodies after.
  std::string large = R"({"instances": [0.5)";
  while (large.size() <= PredictBodyReader::kMaxBodyBytes) large += ", 0.5";
  large += "]}";
  EXPECT_FALSE(reader.Start(large));
  reader.ReleaseIfLarge();
  EXPECT_TRUE(FastAgreesWithDom(reader, zeros, flat));
  EXPECT_TRUE(FastAgreesWithDom(reader, R"({"inputs": {"b": [[1, 2]], "a": [3]}})", two));
}

TEST(PredictBodyReaderTest, DeclinesWhatOnlyTheDomPathReadsOrRefuses) {
  const Signature one = Sig({Input("x", DType::kFloat32, Shape{-1, 3})});
  const Signature ints = Sig({Input("x", DType::kInt64, Shape{-1})});
  const Signature strings = Sig({Input("x", DType::kString, Shape{-1})});
  const Signature two = Sig({Input("a", DType::kFloat32, Shape{-1}), Input("b", DType::kFloat32, Shape{-1})});
  PredictBodyReader reader;
  std::vector<NamedTensor> inputs;
  auto declined = [&](std::string_view body, const Signature& signature) {
    return !reader.Start(body) || !reader.DecodeInputs(signature, &inputs);
  };
  for (const std::string body : {
           R"({"instances": [[NaN, 1, 2]]})",             // TF Serving's tokens: the DOM path's
           R"({"instances": [[Infinity, -Infinity, 1]]})",
           R"({"instances": [[1.25e308, 1, 2]]})",        // the DOM path's NaN stand-in
           R"({"instances": [[1e39, 1, 2]]})",            // out of float32's range: its error
           R"({"instances": []})",
           R"({"instances": [[1, 2], [3]]})",
           R"({"instances": [1, [2]]})",
           R"({"instances": [{"x": [1, 2, 3]}]})",        // named instances
           R"({"instances": [[1, 2, 3]], "inputs": [[1, 2, 3]]})",
           R"({"instances": [[1, 2, 3]], "instances": [[1, 2, 3]]})",
           R"({"instances": [[1, 2, 3]], "extra": 1})",
           R"({"instances": [[1, 2, 3]]} trailing)",
           R"({"instances": [[1, 2, 3]])",
           R"({"instances": [[1, 2, 3x]]})",
           R"({"instances": [[01, 2, 3]]})",
           R"({"signature_name": 7, "instances": [[1, 2, 3]]})",
           R"({"inputs": {"y": [1]}})",
           R"({"inputs": {"b64": "AAAA"}})",
           R"({"instances": [[[[[[[[[[1]]]]]]]]]]})",   // deeper than a tensor's rank
           R"([1, 2, 3])",
           R"()",
       }) {
    EXPECT_TRUE(declined(body, one)) << body;
  }
  EXPECT_TRUE(declined(R"({"instances": [1, 2, 3]})", ints));
  EXPECT_TRUE(declined(R"({"instances": ["a", "b"]})", strings));
  EXPECT_TRUE(declined(R"({"instances": [1, 2]})", two));
  EXPECT_TRUE(declined(R"({"inputs": {"a": [1], "a": [2]}})", two));
  EXPECT_TRUE(declined(R"({"inputs": {"a": [1]}})", two));
  // After all those, the reader still reads a good body.
  EXPECT_TRUE(FastAgreesWithDom(reader, R"({"instances": [[1, 2, 3]]})", one));
}

TEST(PredictBodyReaderTest, MutatedBodiesAreReadAsTheDomPathReadsThemOrDeclined) {
  const Signature one = Sig({Input("x", DType::kFloat32, Shape{-1, 4})});
  const std::vector<std::string> seeds = {
      R"({"instances": [[1.5, -2, 3e-3, 4e10], [0.25, 1e-40, -0.0, 7]]})",
      R"({"signature_name": "serving_default", "inputs": {"x": [[1, 2, 3, 4]]}})",
  };
  const std::string alphabet = "0123456789.-+eE[]{},:\" NaIfinty";
  std::mt19937 rng(20261125);
  PredictBodyReader reader;
  int accepted = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string body = seeds[i % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % body.size();
      switch (rng() % 3) {
        case 0: body[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: body.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        default: body.erase(at, 1); break;
      }
      if (body.empty()) body = "{";
    }
    accepted += FastAgreesWithDom(reader, body, one);
  }
  EXPECT_GT(accepted, 0);  // some mutations keep the body valid (a digit for a digit)
}

}  // namespace
}  // namespace lockstep
