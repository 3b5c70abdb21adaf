// TfIdfVectorizer(x [C] or [N, C] of int32 or int64 tokens) -> float32 [E] or [N, E]: ONNX's
// n-gram counter. Attrs as ONNX names them: the n-grams to count are pool_int64s, grouped by
// length (ngram_counts[i]: where the (i + 1)-grams start), each counted into output column
// ngram_indexes[k] (E = the largest + 1); n from min_gram_length to max_gram_length; the items
// of an n-gram may lie up to max_skip_count apart (every gap from 0 to it is counted, but a
// unigram once); mode "TF" (counts), "IDF" (weights where the count is not 0) or "TFIDF"
// (counts times weights; weights default to ones).
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {
namespace {

enum class TfIdfMode { kTf, kIdf, kTfIdf };

struct TfIdfPlan {
  int64_t min_n = 1, max_n = 1, max_skip = 0;
  TfIdfMode mode = TfIdfMode::kTf;
  int64_t columns = 0;
  std::map<std::vector<int64_t>, int64_t> column_of;  // n-gram -> output column
  std::vector<double> weights;                        // per column; empty: ones
};

StatusOr<TfIdfPlan> ReadTfIdfPlan(const AttrMap& attrs) {
  TfIdfPlan p;
  LS_ASSIGN_OR_RETURN(p.min_n, attrs.GetInt("min_gram_length"));
  LS_ASSIGN_OR_RETURN(p.max_n, attrs.GetInt("max_gram_length"));
  LS_ASSIGN_OR_RETURN(p.max_skip, attrs.GetInt("max_skip_count"));
  if (p.min_n < 1 || p.max_n < p.min_n || p.max_n > 64 || p.max_skip < 0 || p.max_skip > 1024) {
    return InvalidArgument("TfIdfVectorizer: need 1 <= min_gram_length <= max_gram_length <= 64 and 0 <= max_skip_count <= 1024");
  }
  LS_ASSIGN_OR_RETURN(std::string_view mode, attrs.GetStringViewOr("mode", "TF"));
  if (mode == "TF") {
    p.mode = TfIdfMode::kTf;
  } else if (mode == "IDF") {
    p.mode = TfIdfMode::kIdf;
  } else if (mode == "TFIDF") {
    p.mode = TfIdfMode::kTfIdf;
  } else {
    return InvalidArgument("TfIdfVectorizer: mode '" + Str(mode) + "' is not TF, IDF or TFIDF");
  }
  LS_ASSIGN_OR_RETURN(std::span<const int64_t> pool, attrs.GetInts("pool_int64s"));
  LS_ASSIGN_OR_RETURN(std::span<const int64_t> counts, attrs.GetInts("ngram_counts"));
  LS_ASSIGN_OR_RETURN(std::span<const int64_t> indexes, attrs.GetInts("ngram_indexes"));
  size_t k = 0;  // the n-gram's number in the pool
  for (size_t i = 0; i < counts.size(); ++i) {
    const int64_t n = static_cast<int64_t>(i) + 1;
    const int64_t begin = counts[i];
    const int64_t end = i + 1 < counts.size() ? counts[i + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end < begin || end > static_cast<int64_t>(pool.size()) || (end - begin) % n != 0) {
      return InvalidArgument("TfIdfVectorizer: ngram_counts do not split pool_int64s into n-grams");
    }
    for (int64_t at = begin; at < end; at += n, ++k) {
      if (k >= indexes.size() || indexes[k] < 0 || indexes[k] >= (int64_t{1} << 24)) {
        return InvalidArgument("TfIdfVectorizer: ngram_indexes must give every n-gram a column in [0, 2^24)");
      }
      // A repeated n-gram counts into its first column.
      p.column_of.emplace(std::vector<int64_t>(pool.begin() + at, pool.begin() + at + n), indexes[k]);
      p.columns = std::max(p.columns, indexes[k] + 1);
    }
  }
  if (k != indexes.size()) return InvalidArgument("TfIdfVectorizer: ngram_indexes and the pool's n-grams differ in number");
  if (attrs.Has("weights")) {
    LS_ASSIGN_OR_RETURN(std::span<const double> w, attrs.GetFloats("weights"));
    if (w.size() != indexes.size()) return InvalidArgument("TfIdfVectorizer: one weight per n-gram");
    p.weights.assign(static_cast<size_t>(p.columns), 1.0);
    for (size_t j = 0; j < w.size(); ++j) p.weights[static_cast<size_t>(indexes[j])] = w[j];
  }
  return p;
}

Status CheckTokens(const TensorSpec& x) {
  if (!IsIndexDType(x.dtype) || x.shape.rank() < 1 || x.shape.rank() > 2) {
    return InvalidArgument("TfIdfVectorizer: x must be int32 or int64 of rank 1 or 2, got " + Str(DTypeName(x.dtype)) +
                           x.shape.ToString());
  }
  return Status::Ok();
}

Shape CountsShape(const Shape& x, int64_t columns) { return x.rank() == 1 ? Shape{columns} : Shape{x[0], columns}; }

StatusOr<std::vector<TensorSpec>> InferTfIdf(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("TfIdfVectorizer", ctx.inputs.size(), 1, 1));
  LS_RETURN_IF_ERROR(CheckTokens(ctx.inputs[0]));
  LS_ASSIGN_OR_RETURN(TfIdfPlan p, ReadTfIdfPlan(ctx.attrs));
  return Single(DType::kFloat32, CountsShape(ctx.inputs[0].shape, p.columns));
}

template <typename T>
void CountRow(const TfIdfPlan& p, const T* row, int64_t length, double* counts) {
  std::vector<int64_t> gram;
  // A gap of `skip` between items; unigrams are the same for every gap, so counted at 0 only.
  for (int64_t skip = 0; skip <= p.max_skip; ++skip) {
    const int64_t min_n = skip == 0 ? p.min_n : std::max<int64_t>(p.min_n, 2);
    if (min_n > p.max_n) break;
    for (int64_t start = 0; start < length; ++start) {
      gram.clear();
      for (int64_t n = 1, at = start; n <= p.max_n && at < length; ++n, at += skip + 1) {
        gram.push_back(static_cast<int64_t>(row[at]));
        if (n < min_n) continue;
        if (auto it = p.column_of.find(gram); it != p.column_of.end()) counts[it->second] += 1;
      }
    }
  }
}

Status TfIdfKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_RETURN_IF_ERROR(CheckTokens({x.dtype(), x.shape()}));
  LS_ASSIGN_OR_RETURN(TfIdfPlan p, ReadTfIdfPlan(ctx.attrs()));
  const int64_t rows = x.shape().rank() == 1 ? 1 : x.shape()[0];
  const int64_t length = x.shape()[x.shape().rank() - 1];
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, DType::kFloat32, CountsShape(x.shape(), p.columns)));
  std::vector<double> counts(static_cast<size_t>(p.columns));
  float* y = out->mutable_data<float>().data();
  for (int64_t r = 0; r < rows; ++r) {
    std::fill(counts.begin(), counts.end(), 0.0);
    if (x.dtype() == DType::kInt32) {
      CountRow(p, x.data<int32_t>().data() + r * length, length, counts.data());
    } else {
      CountRow(p, x.data<int64_t>().data() + r * length, length, counts.data());
    }
    for (int64_t c = 0; c < p.columns; ++c) {
      const double count = counts[static_cast<size_t>(c)];
      const double weight = p.weights.empty() ? 1.0 : p.weights[static_cast<size_t>(c)];
      const double v = p.mode == TfIdfMode::kTf ? count : p.mode == TfIdfMode::kIdf ? (count > 0 ? weight : 0.0)
                                                                                     : count * weight;
      y[r * p.columns + c] = static_cast<float>(v);
    }
  }
  return Status::Ok();
}

}  // namespace

void RegisterTfIdfOps(OpRegistry& registry) {
  OpDef def = SimpleOpDef("TfIdfVectorizer", 1, InferTfIdf, TfIdfKernel);
  (void)registry.Register(std::move(def));
}

}  // namespace lockstep
