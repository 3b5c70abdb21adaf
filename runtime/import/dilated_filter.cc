#include "runtime/import/dilated_filter.h"

#include <algorithm>
#include <string>

namespace lockstep {

StatusOr<Tensor> DilateFilter(const Tensor& filter, int h_axis, int64_t dh, int64_t dw) {
  const Shape& s = filter.shape();
  if (filter.dtype() != DType::kFloat32) {
    return Unimplemented("dilations of a " + std::string(DTypeName(filter.dtype())) + " filter (only float32)");
  }
  if (h_axis < 0 || h_axis + 1 >= s.rank() || dh < 1 || dw < 1) {
    return InvalidArgument("dilations [" + std::to_string(dh) + "," + std::to_string(dw) + "] of a filter " +
                           s.ToString());
  }
  const int64_t kh = s.dim(h_axis), kw = s.dim(h_axis + 1);
  if (kh < 1 || kw < 1 || (kh - 1) > (kMaxDilatedExtent - 1) / dh || (kw - 1) > (kMaxDilatedExtent - 1) / dw) {
    return Unimplemented("a dilated window of more than " + std::to_string(kMaxDilatedExtent) + " pixels");
  }
  const int64_t eh = (kh - 1) * dh + 1, ew = (kw - 1) * dw + 1;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < h_axis; ++d) outer *= s.dim(d);
  for (int d = h_axis + 2; d < s.rank(); ++d) inner *= s.dim(d);
  Shape spread = s;
  spread.set_dim(h_axis, eh);
  spread.set_dim(h_axis + 1, ew);
  Tensor out(DType::kFloat32, spread);  // zeros
  const float* src = filter.data<float>().data();
  float* dst = out.mutable_data<float>().data();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t y = 0; y < kh; ++y) {
      for (int64_t x = 0; x < kw; ++x) {
        const float* from = src + ((o * kh + y) * kw + x) * inner;
        std::copy(from, from + inner, dst + ((o * eh + y * dh) * ew + x * dw) * inner);
      }
    }
  }
  return out;
}

}  // namespace lockstep
