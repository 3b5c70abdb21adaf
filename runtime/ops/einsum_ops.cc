// Einsum(inputs...; attr equation): numpy's and ONNX's Einstein summation, with "..." for
// broadcast dimensions and the implicit output (the labels used once, in alphabetical order,
// after the ellipsis) when the equation has no "->". Every label's dimension must agree where
// it appears (1 broadcasts within the ellipsis). Computed by one loop over every combination of
// the labels, each product in double (for floats) added to its output element: any equation,
// at the cost of its full product. float32, float64, int32, int64.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "runtime/op_registry.h"
#include "runtime/ops/dtype_sets.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {
namespace {

constexpr int kMaxLabels = 52 + Shape::kMaxRank;  // a-z, A-Z, and the ellipsis' dimensions
constexpr int kMaxOperands = 8;

// One operand's (or the output's) axes as label numbers.
struct Term {
  int rank = 0;
  std::array<int, Shape::kMaxRank> labels{};
};

struct Equation {
  int operands = 0;
  std::array<Term, kMaxOperands> inputs{};
  Term output;
  std::array<int64_t, kMaxLabels> dims{};  // -1 unknown
};

int LetterLabel(char c) { return c >= 'a' && c <= 'z' ? c - 'a' : c >= 'A' && c <= 'Z' ? 26 + (c - 'A') : -1; }

// Parses `text` for operands of `shapes` (ranks and dimensions, -1 unknown).
StatusOr<Equation> ParseEquation(std::string_view text, std::span<const Shape> shapes) {
  auto bad = [&](const std::string& why) { return InvalidArgument("Einsum: equation '" + Str(text) + "': " + why); };
  Equation eq;
  if (shapes.size() > kMaxOperands) return bad("more than " + std::to_string(kMaxOperands) + " operands");
  std::string spaced;
  for (char c : text) {
    if (c != ' ') spaced += c;
  }
  const size_t arrow = spaced.find("->");
  const std::string_view lhs = std::string_view(spaced).substr(0, arrow);
  int ellipsis_rank = -1;
  std::array<int, 52> uses{};
  // The terms, split at the commas.
  std::array<std::string_view, kMaxOperands> terms;
  size_t num_terms = 0;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    if (num_terms == terms.size()) return bad("more terms than operands");
    terms[num_terms++] = lhs.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (num_terms != shapes.size()) {
    return bad(std::to_string(num_terms) + " terms for " + std::to_string(shapes.size()) + " operands");
  }
  for (size_t k = 0; k < shapes.size(); ++k) {
    const std::string_view part = terms[k];
    Term& t = eq.inputs[k];
    const Shape& s = shapes[k];
    const size_t dots = part.find("...");
    const int letters = static_cast<int>(part.size()) - (dots == std::string_view::npos ? 0 : 3);
    const int this_ellipsis = s.rank() - letters;
    if (this_ellipsis < 0 || (dots == std::string_view::npos && this_ellipsis != 0)) {
      return bad("term '" + Str(part) + "' does not fit operand " + std::to_string(k) + " of shape " + s.ToString());
    }
    if (dots != std::string_view::npos) ellipsis_rank = std::max(ellipsis_rank, this_ellipsis);
    for (size_t i = 0; i < part.size(); ++i) {
      if (dots != std::string_view::npos && i == dots) {
        // The ellipsis' dimensions, aligned at the right of the longest one.
        for (int e = 0; e < this_ellipsis; ++e) t.labels[static_cast<size_t>(t.rank++)] = 52 + (Shape::kMaxRank - this_ellipsis + e);
        i += 2;
        continue;
      }
      const int label = LetterLabel(part[i]);
      if (label < 0) return bad("'" + std::string(1, part[i]) + "' is not a label");
      ++uses[static_cast<size_t>(label)];
      if (t.rank == Shape::kMaxRank) return bad("term '" + Str(part) + "' has too many labels");
      t.labels[static_cast<size_t>(t.rank++)] = label;
    }
  }
  eq.operands = static_cast<int>(shapes.size());
  if (arrow != std::string::npos) {
    const std::string_view rhs = std::string_view(spaced).substr(arrow + 2);
    for (size_t i = 0; i < rhs.size(); ++i) {
      if (rhs.substr(i, 3) == "...") {
        for (int e = 0; e < std::max(ellipsis_rank, 0); ++e) {
          eq.output.labels[static_cast<size_t>(eq.output.rank++)] = 52 + (Shape::kMaxRank - ellipsis_rank + e);
        }
        i += 2;
        continue;
      }
      const int label = LetterLabel(rhs[i]);
      if (label < 0 || uses[static_cast<size_t>(label)] == 0) return bad("output label '" + std::string(1, rhs[i]) + "' is in no input");
      if (eq.output.rank == Shape::kMaxRank) return bad("the output's rank exceeds the maximum");
      eq.output.labels[static_cast<size_t>(eq.output.rank++)] = label;
    }
  } else {
    for (int e = 0; e < std::max(ellipsis_rank, 0); ++e) {
      eq.output.labels[static_cast<size_t>(eq.output.rank++)] = 52 + (Shape::kMaxRank - ellipsis_rank + e);
    }
    for (int label = 0; label < 52; ++label) {
      if (uses[static_cast<size_t>(label)] != 1) continue;
      if (eq.output.rank == Shape::kMaxRank) return bad("the output's rank exceeds the maximum");
      eq.output.labels[static_cast<size_t>(eq.output.rank++)] = label;
    }
  }
  // Each label's dimension: known sizes agree; 1 broadcasts inside the ellipsis.
  eq.dims.fill(-2);  // -2: not seen
  for (int k = 0; k < eq.operands; ++k) {
    const Term& t = eq.inputs[static_cast<size_t>(k)];
    for (int a = 0; a < t.rank; ++a) {
      const int label = t.labels[static_cast<size_t>(a)];
      const int64_t d = shapes[static_cast<size_t>(k)].dim(a);
      int64_t& have = eq.dims[static_cast<size_t>(label)];
      if (have == -2 || (label >= 52 && have == 1)) {
        have = d;
      } else if (d >= 0 && have >= 0 && d != have && !(label >= 52 && d == 1)) {
        return bad("label dimensions differ: " + std::to_string(have) + " and " + std::to_string(d));
      } else if (have < 0) {
        have = d;
      }
    }
  }
  return eq;
}

StatusOr<std::vector<TensorSpec>> InferEinsum(const ShapeInferenceContext& ctx) {
  if (ctx.inputs.empty()) return InvalidArgument("Einsum: needs at least one input");
  LS_ASSIGN_OR_RETURN(std::string_view text, ctx.attrs.GetStringViewOr("equation", ""));
  std::vector<Shape> shapes;
  for (const TensorSpec& in : ctx.inputs) {
    LS_RETURN_IF_ERROR(CheckDTypeIn("Einsum", in.dtype, DTypeSet::kNumeric));
    LS_RETURN_IF_ERROR(CheckSameDType("Einsum", ctx.inputs[0].dtype, in.dtype));
    shapes.push_back(in.shape);
  }
  LS_ASSIGN_OR_RETURN(Equation eq, ParseEquation(text, shapes));
  Shape out;
  for (int a = 0; a < eq.output.rank; ++a) {
    const int64_t d = eq.dims[static_cast<size_t>(eq.output.labels[static_cast<size_t>(a)])];
    out.AddDim(d < 0 ? -1 : d);
  }
  return Single(ctx.inputs[0].dtype, out);
}

Status EinsumKernel(KernelContext& ctx) {
  LS_ASSIGN_OR_RETURN(std::string_view text, ctx.attrs().GetStringViewOr("equation", ""));
  std::array<Shape, kMaxOperands> shapes;
  const int n = ctx.num_inputs();
  if (n > kMaxOperands) return InvalidArgument("Einsum: more than " + std::to_string(kMaxOperands) + " operands");
  for (int k = 0; k < n; ++k) {
    LS_RETURN_IF_ERROR(CheckDTypeIn("Einsum", ctx.input(k).dtype(), DTypeSet::kNumeric));
    LS_RETURN_IF_ERROR(CheckSameDType("Einsum", ctx.input(0).dtype(), ctx.input(k).dtype()));
    shapes[static_cast<size_t>(k)] = ctx.input(k).shape();
  }
  LS_ASSIGN_OR_RETURN(Equation eq, ParseEquation(text, std::span<const Shape>(shapes.data(), static_cast<size_t>(n))));
  Shape out_shape;
  for (int a = 0; a < eq.output.rank; ++a) out_shape.AddDim(eq.dims[static_cast<size_t>(eq.output.labels[static_cast<size_t>(a)])]);
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, ctx.input(0).dtype(), out_shape));
  // The labels in use, and each operand's stride per label (0 where it lacks the label or
  // broadcasts it).
  std::array<int, kMaxLabels> used{};
  int num_used = 0;
  for (int label = 0; label < kMaxLabels; ++label) {
    if (eq.dims[static_cast<size_t>(label)] >= 0) used[static_cast<size_t>(num_used++)] = label;
  }
  std::array<std::array<int64_t, kMaxLabels>, kMaxOperands + 1> strides{};
  for (int k = 0; k <= n; ++k) {
    const Term& t = k < n ? eq.inputs[static_cast<size_t>(k)] : eq.output;
    const Shape& s = k < n ? shapes[static_cast<size_t>(k)] : out_shape;
    const auto rm = RowMajorStrides(s);
    for (int a = 0; a < t.rank; ++a) {
      if (s.dim(a) != 1 || eq.dims[static_cast<size_t>(t.labels[static_cast<size_t>(a)])] == 1) {
        strides[static_cast<size_t>(k)][static_cast<size_t>(t.labels[static_cast<size_t>(a)])] += rm[static_cast<size_t>(a)];
      }
    }
  }
  int64_t total = 1;
  for (int u = 0; u < num_used; ++u) total *= eq.dims[static_cast<size_t>(used[static_cast<size_t>(u)])];
  return DispatchDTypeIn<DTypeSet::kNumeric>(ctx.input(0).dtype(), [&](auto zero) {
    using T = decltype(zero);
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    T* dst = out->mutable_data<T>().data();
    std::fill(dst, dst + out->num_elements(), T{});
    if (total == 0) return Status::Ok();
    std::array<const T*, kMaxOperands> src{};
    for (int k = 0; k < n; ++k) src[static_cast<size_t>(k)] = ctx.input(k).data<T>().data();
    std::array<int64_t, kMaxLabels> index{};
    std::array<int64_t, kMaxOperands + 1> offset{};
    // An odometer over the used labels, the last fastest; the offsets follow it.
    for (int64_t step = 0; step < total; ++step) {
      Acc product = 1;
      for (int k = 0; k < n; ++k) product *= static_cast<Acc>(src[static_cast<size_t>(k)][offset[static_cast<size_t>(k)]]);
      dst[offset[static_cast<size_t>(n)]] = static_cast<T>(static_cast<Acc>(dst[offset[static_cast<size_t>(n)]]) + product);
      for (int u = num_used - 1; u >= 0; --u) {
        const size_t label = static_cast<size_t>(used[static_cast<size_t>(u)]);
        for (int k = 0; k <= n; ++k) offset[static_cast<size_t>(k)] += strides[static_cast<size_t>(k)][label];
        if (++index[label] < eq.dims[label]) break;
        for (int k = 0; k <= n; ++k) offset[static_cast<size_t>(k)] -= strides[static_cast<size_t>(k)][label] * eq.dims[label];
        index[label] = 0;
      }
    }
    return Status::Ok();
  });
}

}  // namespace

void RegisterEinsumOps(OpRegistry& registry) {
  OpDef def = SimpleOpDef("Einsum", 1, InferEinsum, EinsumKernel);
  def.max_inputs = kMaxOperands;
  (void)registry.Register(std::move(def));
}

}  // namespace lockstep
