// StringNormalizer(x string [C] or [1, C], stopwords string [K]; attrs case_change_action =
// "NONE" | "LOWER" | "UPPER", is_case_sensitive = false) -> string [C'] or [1, C']: ONNX's,
// the stopwords dropped (compared ignoring ASCII case unless is_case_sensitive), then the case
// of the rest changed. Case changes map ASCII letters and keep every other byte, so UTF-8 text
// stays valid. When every string is a stopword the output is one empty string, as ONNX says.
#include <algorithm>
#include <string>
#include <string_view>

#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"

namespace lockstep {
namespace {

char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
char AsciiUpper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }

bool SameIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return AsciiLower(x) == AsciiLower(y); });
}

enum class CaseChange { kNone, kLower, kUpper };

StatusOr<CaseChange> ReadCaseChange(const AttrMap& attrs) {
  LS_ASSIGN_OR_RETURN(std::string_view action, attrs.GetStringViewOr("case_change_action", "NONE"));
  if (action == "NONE") return CaseChange::kNone;
  if (action == "LOWER") return CaseChange::kLower;
  if (action == "UPPER") return CaseChange::kUpper;
  return InvalidArgument("StringNormalizer: case_change_action must be NONE, LOWER or UPPER, got '" +
                         std::string(action) + "'");
}

Status CheckStringNormalizerInputs(const TensorSpec& x, const TensorSpec& stopwords) {
  if (x.dtype != DType::kString || stopwords.dtype != DType::kString) {
    return InvalidArgument("StringNormalizer: inputs must be strings, got " + Str(DTypeName(x.dtype)) + " and " +
                           Str(DTypeName(stopwords.dtype)));
  }
  const bool row = x.shape.rank() == 2 && (x.shape.dim(0) == 1 || x.shape.dim(0) < 0);
  if (x.shape.rank() != 1 && !row) {
    return InvalidArgument("StringNormalizer: x must be [C] or [1, C], got " + x.shape.ToString());
  }
  if (stopwords.shape.rank() != 1) {
    return InvalidArgument("StringNormalizer: stopwords must be 1-D, got " + stopwords.shape.ToString());
  }
  return Status::Ok();
}

StatusOr<std::vector<TensorSpec>> InferStringNormalizer(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("StringNormalizer", ctx.inputs.size(), 2, 2));
  LS_RETURN_IF_ERROR(CheckStringNormalizerInputs(ctx.inputs[0], ctx.inputs[1]));
  LS_RETURN_IF_ERROR(ReadCaseChange(ctx.attrs).status());
  return Single(DType::kString, ctx.inputs[0].shape.rank() == 1 ? Shape{-1} : Shape{1, -1});
}

Status StringNormalizerKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& stop = ctx.input(1);
  LS_RETURN_IF_ERROR(CheckStringNormalizerInputs({x.dtype(), x.shape()}, {stop.dtype(), stop.shape()}));
  LS_ASSIGN_OR_RETURN(CaseChange change, ReadCaseChange(ctx.attrs()));
  LS_ASSIGN_OR_RETURN(bool case_sensitive, ctx.attrs().GetBoolOr("is_case_sensitive", false));
  const auto strings = x.data<std::string>();
  const auto stopwords = stop.data<std::string>();
  auto is_stopword = [&](const std::string& s) {
    return std::any_of(stopwords.begin(), stopwords.end(), [&](const std::string& w) {
      return case_sensitive ? s == w : SameIgnoringCase(s, w);
    });
  };
  const int64_t kept = std::count_if(strings.begin(), strings.end(), [&](const std::string& s) { return !is_stopword(s); });
  const int64_t n = std::max<int64_t>(kept, 1);
  LS_ASSIGN_OR_RETURN(Tensor * out,
                      ctx.AllocateOutput(0, DType::kString, x.shape().rank() == 1 ? Shape{n} : Shape{1, n}));
  auto dst = out->mutable_data<std::string>();
  if (kept == 0) {
    dst[0].clear();
    return Status::Ok();
  }
  size_t j = 0;
  for (const std::string& s : strings) {
    if (is_stopword(s)) continue;
    std::string& d = dst[j++];
    d = s;
    if (change == CaseChange::kLower) std::transform(d.begin(), d.end(), d.begin(), AsciiLower);
    if (change == CaseChange::kUpper) std::transform(d.begin(), d.end(), d.begin(), AsciiUpper);
  }
  return Status::Ok();
}

}  // namespace

void RegisterStringOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef("StringNormalizer", 2, InferStringNormalizer, StringNormalizerKernel));
}

}  // namespace lockstep
