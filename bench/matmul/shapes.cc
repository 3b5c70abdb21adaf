#include "bench/matmul/shapes.h"

#include <cstdio>
#include <tuple>

namespace lockstep::bench {

std::string_view MatmulShape::OpName() const {
  if (transpose_a) return transpose_b ? "A^T*B^T" : "A^T*B";
  return transpose_b ? "A*B^T" : "A*B";
}

namespace {

MatmulShape Plain(int64_t m, int64_t k, int64_t n) {
  return {std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n), m, k, n, false, false, true};
}

std::vector<MatmulShape> MakeShapes() {
  std::vector<MatmulShape> shapes = {Plain(1, 784, 512),   Plain(32, 784, 512),     Plain(256, 784, 512),
                                     Plain(512, 512, 512), Plain(1024, 1024, 1024), Plain(2048, 2048, 2048),
                                     Plain(64, 4096, 4096)};
  // MLP 784-1024-1024-10 at batch 256. Layer l maps X[256, in] to Y[256, out] with W[in, out].
  constexpr int64_t kBatch = 256;
  const int64_t widths[] = {784, 1024, 1024, 10};
  for (int l = 0; l < 3; ++l) {
    const int64_t in = widths[l], out = widths[l + 1];
    const std::string prefix = "mlp" + std::to_string(l + 1);
    // Forward: the weight is constant across calls in serving, so it is packed once.
    shapes.push_back({prefix + ".fwd", kBatch, in, out, false, false, true});
    // dX = dY * W^T, W stored [in, out] = [N, K]. W is a weight, but in training it changes
    // every step, so neither side may pack it ahead of the call.
    shapes.push_back({prefix + ".dx", kBatch, out, in, false, true, false});
    // dW = X^T * dY, X stored [256, in] = [K, M]; dY is a gradient.
    shapes.push_back({prefix + ".dw", in, kBatch, out, true, false, false});
  }
  // The 1x1 convolutions of MobileNetV3-Large and EfficientNet-B0 at batch 1 (M = the pixels):
  // K or N of 16 to 40 channels, where packing and the epilogue weigh against the products; and
  // ConvNeXt-T's first stage's pointwise layers (K or N of 96); EfficientNet-B0's largest three
  // at batch 8, whose operands come from memory.
  for (const auto& [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{12544, 16, 96}, {12544, 16, 64}, {12544, 16, 16},
                                {3136, 24, 144}, {3136, 144, 24}, {3136, 24, 72}, {784, 40, 240}, {784, 240, 40},
                                {3136, 96, 384}, {3136, 384, 96}, {100352, 16, 96}, {25088, 24, 144},
                                {25088, 144, 24}}) {
    shapes.push_back({"pw" + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n), m, k, n, false,
                      false, true});
  }
  return shapes;
}

}  // namespace

const std::vector<MatmulShape>& AllShapes() {
  static const std::vector<MatmulShape> shapes = MakeShapes();
  return shapes;
}

std::vector<std::string> SplitList(std::string_view list) {
  std::vector<std::string> items;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    if (!item.empty()) items.emplace_back(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return items;
}

std::optional<std::vector<MatmulShape>> SelectShapes(std::string_view list) {
  std::vector<bool> chosen(AllShapes().size(), false);
  for (const std::string& item : SplitList(list)) {
    bool matched = false;
    for (size_t i = 0; i < AllShapes().size(); ++i) {
      const MatmulShape& shape = AllShapes()[i];
      const bool mlp = shape.name.starts_with("mlp"), pointwise = shape.name.starts_with("pw");
      if (item == "all" || item == shape.name || (item == "mlp" && mlp) || (item == "pointwise" && pointwise) ||
          (item == "plain" && !mlp && !pointwise)) {
        chosen[i] = true;
        matched = true;
      }
    }
    if (!matched) {
      std::fprintf(stderr, "--shapes: unknown shape '%s'; known:", item.c_str());
      for (const MatmulShape& shape : AllShapes()) std::fprintf(stderr, " %s", shape.name.c_str());
      std::fprintf(stderr, " (or mlp, pointwise, plain, all)\n");
      return std::nullopt;
    }
  }
  // Table order, whatever order the flag named them in.
  std::vector<MatmulShape> shapes;
  for (size_t i = 0; i < AllShapes().size(); ++i) {
    if (chosen[i]) shapes.push_back(AllShapes()[i]);
  }
  // The 1x1 convolutions of MobileNetV3-Large and EfficientNet-B0 at batch 1 (M = the pixels):
  // K or N of 16 to 40 channels, where packing and the epilogue weigh against the products; and
  // ConvNeXt-T's first stage's pointwise layers (K or N of 96); EfficientNet-B0's largest three
  // at batch 8, whose operands come from memory.
  for (const auto& [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{12544, 16, 96}, {12544, 16, 64}, {12544, 16, 16},
                                {3136, 24, 144}, {3136, 144, 24}, {3136, 24, 72}, {784, 40, 240}, {784, 240, 40},
                                {3136, 96, 384}, {3136, 384, 96}, {100352, 16, 96}, {25088, 24, 144},
                                {25088, 144, 24}}) {
    shapes.push_back({"pw" + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n), m, k, n, false,
                      false, true});
  }
  return shapes;
}

}  // namespace lockstep::bench
