// ONNX's signal-processing ops (opset 17), for audio front ends built into a graph:
//   HannWindow, HammingWindow, BlackmanWindow(size; attrs periodic = 1, dtype): the window
//     of `size` points (periodic: over size, else size - 1, intervals);
//   DFT(x [batch, ..., n, ..., 1 | 2], dft_length?; attrs axis = 1, inverse = 0, onesided = 0):
//     the discrete Fourier transform along `axis` of real ([..., 1]) or complex ([..., 2])
//     values, truncated or zero-padded to dft_length, the inverse scaled by 1 / n, onesided
//     keeping the first n / 2 + 1 bins; complex out ([..., 2]);
//   STFT(signal [batch, length, 1 | 2], frame_step, window?, frame_length?; attr onesided = 1):
//     the DFT of each windowed frame -> [batch, frames, bins, 2];
//   MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz;
//     attr dtype): the triangular filters that map dft_length / 2 + 1 spectrogram bins to
//     num_mel_bins mel bins, by ONNX's formula (edges on the mel scale, floored to bins).
// Transforms are computed directly (O(n²) per transform, in double): exact to float32, and as
// fast as these ops need to be beside the convolutions that follow them. float32 and float64.
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <numbers>
#include <vector>
#include <string>

#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {
namespace {

enum class WindowKind { kHann, kHamming, kBlackman };

constexpr std::string_view WindowName(WindowKind k) {
  return k == WindowKind::kHann ? "HannWindow" : k == WindowKind::kHamming ? "HammingWindow" : "BlackmanWindow";
}

StatusOr<int64_t> ReadCount(std::string_view op, std::string_view what, const Tensor& t) {
  if (!IsIndexDType(t.dtype()) || t.num_elements() != 1) {
    return InvalidArgument(Str(op) + ": " + Str(what) + " must be one int32 or int64");
  }
  const int64_t v = t.dtype() == DType::kInt32 ? int64_t{t.data<int32_t>()[0]} : t.data<int64_t>()[0];
  if (v < 0 || v > (int64_t{1} << 30)) return InvalidArgument(Str(op) + ": " + Str(what) + " " + std::to_string(v) + " is out of range");
  return v;
}

template <WindowKind K>
StatusOr<std::vector<TensorSpec>> InferWindow(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount(WindowName(K), ctx.inputs.size(), 1, 1));
  LS_ASSIGN_OR_RETURN(DType dtype, ctx.attrs.GetDType("dtype"));
  LS_RETURN_IF_ERROR(CheckReal(WindowName(K), "attr 'dtype'", dtype));
  const Tensor* size = ctx.value(0);
  int64_t n = -1;
  if (size != nullptr) {
    LS_ASSIGN_OR_RETURN(n, ReadCount(WindowName(K), "size", *size));
  }
  return Single(dtype, Shape{n});
}

template <WindowKind K>
Status WindowKernel(KernelContext& ctx) {
  LS_ASSIGN_OR_RETURN(int64_t n, ReadCount(WindowName(K), "size", ctx.input(0)));
  LS_ASSIGN_OR_RETURN(DType dtype, ctx.attrs().GetDType("dtype"));
  LS_RETURN_IF_ERROR(CheckReal(WindowName(K), "attr 'dtype'", dtype));
  LS_ASSIGN_OR_RETURN(bool periodic, IntFlag(ctx.attrs(), "periodic", true));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, dtype, Shape{n}));
  const double intervals = static_cast<double>(periodic ? n : n - 1);
  return DispatchReal(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* dst = out->mutable_data<T>().data();
    for (int64_t i = 0; i < n; ++i) {
      const double a = intervals > 0 ? 2 * std::numbers::pi * static_cast<double>(i) / intervals : 0.0;
      double v = 0;
      if (K == WindowKind::kHann) v = 0.5 - 0.5 * std::cos(a);
      if (K == WindowKind::kHamming) v = 25.0 / 46.0 - (1 - 25.0 / 46.0) * std::cos(a);
      if (K == WindowKind::kBlackman) v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
      dst[i] = static_cast<T>(v);
    }
    return Status::Ok();
  });
}

// One transform: out[k] = sum_j in[j] * e^(∓2πi jk / n), j over the `count` inputs (zero past
// them), k over `bins`; `stride` apart in elements of 2 (real, imaginary) or 1 (real).
template <typename T>
void Transform(const T* in, int64_t in_stride, int64_t count, bool complex_in, int64_t n, bool inverse, int64_t bins,
               T* out, int64_t out_stride, const T* window) {
  const double sign = inverse ? 1.0 : -1.0;
  for (int64_t k = 0; k < bins; ++k) {
    double re = 0, im = 0;
    for (int64_t j = 0; j < count && j < n; ++j) {
      const double w = window != nullptr ? static_cast<double>(window[j]) : 1.0;
      const double xr = static_cast<double>(in[j * in_stride]) * w;
      const double xi = complex_in ? static_cast<double>(in[j * in_stride + 1]) * w : 0.0;
      // (jk mod n) keeps the angle small, so large transforms stay exact.
      const double angle = sign * 2 * std::numbers::pi * static_cast<double>((j * k) % n) / static_cast<double>(n);
      const double c = std::cos(angle), s = std::sin(angle);
      re += xr * c - xi * s;
      im += xr * s + xi * c;
    }
    if (inverse) {
      re /= static_cast<double>(n);
      im /= static_cast<double>(n);
    }
    out[k * out_stride] = static_cast<T>(re);
    out[k * out_stride + 1] = static_cast<T>(im);
  }
}

struct DftPlan {
  int axis = 1;
  int64_t n = -1, bins = -1;
  bool inverse = false, onesided = false;
  Shape out;
};

StatusOr<DftPlan> PlanDft(const AttrMap& attrs, const Shape& x, const Tensor* length) {
  DftPlan p;
  if (x.rank() < 3 || (x.dim(x.rank() - 1) != 1 && x.dim(x.rank() - 1) != 2 && x.dim(x.rank() - 1) >= 0)) {
    return InvalidArgument("DFT: input " + x.ToString() + " must be [batch, ..., 1 or 2]");
  }
  LS_ASSIGN_OR_RETURN(int64_t axis, attrs.GetIntOr("axis", 1));
  LS_ASSIGN_OR_RETURN(p.axis, NormalizeAxis("DFT", axis, x.rank() - 1));
  if (p.axis == 0) return InvalidArgument("DFT: axis 0 is the batch");
  LS_ASSIGN_OR_RETURN(p.inverse, IntFlag(attrs, "inverse", false));
  LS_ASSIGN_OR_RETURN(p.onesided, IntFlag(attrs, "onesided", false));
  if (p.onesided && p.inverse) return InvalidArgument("DFT: onesided and inverse together are not supported");
  p.n = x.dim(p.axis);
  if (length != nullptr) {
    LS_ASSIGN_OR_RETURN(p.n, ReadCount("DFT", "dft_length", *length));
    if (p.n == 0) return InvalidArgument("DFT: dft_length must be positive");
  }
  p.bins = p.n < 0 ? -1 : p.onesided ? p.n / 2 + 1 : p.n;
  p.out = x;
  p.out.set_dim(p.axis, p.bins);
  p.out.set_dim(x.rank() - 1, 2);
  return p;
}

StatusOr<std::vector<TensorSpec>> InferDft(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("DFT", ctx.inputs.size(), 1, 2));
  LS_RETURN_IF_ERROR(CheckReal("DFT", "input", ctx.inputs[0].dtype));
  const bool length_unknown = ctx.inputs.size() == 2 && ctx.value(1) == nullptr;
  LS_ASSIGN_OR_RETURN(DftPlan p, PlanDft(ctx.attrs, ctx.inputs[0].shape, ctx.inputs.size() == 2 ? ctx.value(1) : nullptr));
  if (length_unknown) p.out.set_dim(p.axis, -1);
  return Single(ctx.inputs[0].dtype, p.out);
}

Status DftKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  LS_RETURN_IF_ERROR(CheckReal("DFT", "input", x.dtype()));
  LS_ASSIGN_OR_RETURN(DftPlan p, PlanDft(ctx.attrs(), x.shape(), ctx.num_inputs() == 2 ? &ctx.input(1) : nullptr));
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, x.dtype(), p.out));
  const int rank = x.shape().rank();
  const bool complex_in = x.shape().dim(rank - 1) == 2;
  if (p.onesided && complex_in) return InvalidArgument("DFT: onesided needs a real input");
  const int64_t count = x.shape().dim(p.axis);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < p.axis; ++d) outer *= x.shape().dim(d);
  for (int d = p.axis + 1; d < rank - 1; ++d) inner *= x.shape().dim(d);
  const int64_t in_channels = complex_in ? 2 : 1;
  return DispatchReal(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* src = x.data<T>().data();
    T* dst = out->mutable_data<T>().data();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        Transform(src + (o * count * inner + i) * in_channels, inner * in_channels, count, complex_in, p.n, p.inverse, p.bins,
                  dst + (o * p.bins * inner + i) * 2, inner * 2, static_cast<const T*>(nullptr));
      }
    }
    return Status::Ok();
  });
}

StatusOr<std::vector<TensorSpec>> InferStft(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("STFT", ctx.inputs.size(), 4, 4));
  const TensorSpec& signal = ctx.inputs[0];
  LS_RETURN_IF_ERROR(CheckReal("STFT", "signal", signal.dtype));
  LS_RETURN_IF_ERROR(CheckRank("STFT", "signal [batch, length, 1 or 2]", signal.shape, 3));
  return Single(signal.dtype, Shape{signal.shape.dim(0), -1, -1, 2});
}

// STFT(signal, frame_step, window, frame_length): the importer gives empty tensors for an
// absent window or frame_length.
Status StftKernel(KernelContext& ctx) {
  const Tensor& signal = ctx.input(0);
  LS_RETURN_IF_ERROR(CheckReal("STFT", "signal", signal.dtype()));
  LS_RETURN_IF_ERROR(CheckRank("STFT", "signal [batch, length, 1 or 2]", signal.shape(), 3));
  const bool complex_in = signal.shape().dim(2) == 2;
  LS_ASSIGN_OR_RETURN(int64_t step, ReadCount("STFT", "frame_step", ctx.input(1)));
  const Tensor& window = ctx.input(2);
  const bool has_window = window.num_elements() > 0;
  if (has_window && (window.dtype() != signal.dtype() || window.shape().rank() != 1)) {
    return InvalidArgument("STFT: window must be a vector of the signal's dtype");
  }
  int64_t frame = has_window ? window.num_elements() : -1;
  if (ctx.input(3).num_elements() > 0) {
    LS_ASSIGN_OR_RETURN(int64_t given, ReadCount("STFT", "frame_length", ctx.input(3)));
    if (has_window && given != frame) return InvalidArgument("STFT: frame_length and the window's length differ");
    frame = given;
  }
  LS_ASSIGN_OR_RETURN(bool onesided, IntFlag(ctx.attrs(), "onesided", true));
  const int64_t length = signal.shape().dim(1), batch = signal.shape().dim(0);
  if (frame < 1 || step < 1 || frame > length) {
    return InvalidArgument("STFT: frames of " + std::to_string(frame) + " by steps of " + std::to_string(step) +
                           " do not fit a signal of " + std::to_string(length));
  }
  if (onesided && complex_in) return InvalidArgument("STFT: onesided needs a real signal");
  const int64_t frames = (length - frame) / step + 1, bins = onesided ? frame / 2 + 1 : frame;
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, signal.dtype(), Shape{batch, frames, bins, 2}));
  const int64_t channels = complex_in ? 2 : 1;
  return DispatchReal(signal.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* src = signal.data<T>().data();
    const T* w = has_window ? window.data<T>().data() : nullptr;
    T* dst = out->mutable_data<T>().data();
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t f = 0; f < frames; ++f) {
        Transform(src + (b * length + f * step) * channels, channels, frame, complex_in, frame, false, bins,
                  dst + ((b * frames + f) * bins) * 2, 2, w);
      }
    }
    return Status::Ok();
  });
}

// ---- MelWeightMatrix ----

StatusOr<double> ReadHertz(const Tensor& t, std::string_view what) {
  if (!IsReal(t.dtype()) || t.num_elements() != 1) {
    return InvalidArgument("MelWeightMatrix: " + Str(what) + " must be one float32 or float64");
  }
  const double v = t.dtype() == DType::kFloat32 ? double{t.data<float>()[0]} : t.data<double>()[0];
  if (!std::isfinite(v) || v < 0) return InvalidArgument("MelWeightMatrix: " + Str(what) + " must be finite and >= 0");
  return v;
}

StatusOr<std::vector<TensorSpec>> InferMelWeightMatrix(const ShapeInferenceContext& ctx) {
  LS_RETURN_IF_ERROR(CheckInputCount("MelWeightMatrix", ctx.inputs.size(), 5, 5));
  LS_ASSIGN_OR_RETURN(DType dtype, ctx.attrs.GetDType("dtype"));
  LS_RETURN_IF_ERROR(CheckReal("MelWeightMatrix", "attr 'dtype'", dtype));
  int64_t bins = -1, mels = -1;
  if (const Tensor* t = ctx.value(0)) {
    LS_ASSIGN_OR_RETURN(mels, ReadCount("MelWeightMatrix", "num_mel_bins", *t));
  }
  if (const Tensor* t = ctx.value(1)) {
    LS_ASSIGN_OR_RETURN(int64_t length, ReadCount("MelWeightMatrix", "dft_length", *t));
    bins = length / 2 + 1;
  }
  return Single(dtype, Shape{bins, mels});
}

Status MelWeightMatrixKernel(KernelContext& ctx) {
  LS_ASSIGN_OR_RETURN(int64_t mels, ReadCount("MelWeightMatrix", "num_mel_bins", ctx.input(0)));
  LS_ASSIGN_OR_RETURN(int64_t length, ReadCount("MelWeightMatrix", "dft_length", ctx.input(1)));
  LS_ASSIGN_OR_RETURN(int64_t rate, ReadCount("MelWeightMatrix", "sample_rate", ctx.input(2)));
  LS_ASSIGN_OR_RETURN(double lower, ReadHertz(ctx.input(3), "lower_edge_hertz"));
  LS_ASSIGN_OR_RETURN(double upper, ReadHertz(ctx.input(4), "upper_edge_hertz"));
  LS_ASSIGN_OR_RETURN(DType dtype, ctx.attrs().GetDType("dtype"));
  LS_RETURN_IF_ERROR(CheckReal("MelWeightMatrix", "attr 'dtype'", dtype));
  if (rate < 1) return InvalidArgument("MelWeightMatrix: sample_rate must be positive");
  const int64_t bins = length / 2 + 1;
  if (bins * mels > (int64_t{1} << 28)) return InvalidArgument("MelWeightMatrix: the matrix would be too large");
  // The mel-bin edges, equally spaced in mels over num_mel_bins + 2 steps, as spectrogram bins.
  const auto mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double low = mel(lower);
  const double step = (mel(upper) - low) / static_cast<double>(mels + 2);
  std::vector<int64_t> edge(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    const double hz = 700.0 * (std::pow(10.0, (static_cast<double>(i) * step + low) / 2595.0) - 1.0);
    const double bin = std::floor(static_cast<double>(length + 1) * hz / static_cast<double>(rate));
    if (!(bin >= 0 && bin <= static_cast<double>(bins))) {
      return InvalidArgument("MelWeightMatrix: the band edges run past the " + std::to_string(bins) +
                             " spectrogram bins (upper_edge_hertz above half the sample rate?)");
    }
    edge[static_cast<size_t>(i)] = static_cast<int64_t>(bin);
  }
  LS_ASSIGN_OR_RETURN(Tensor * out, ctx.AllocateOutput(0, dtype, Shape{bins, mels}));
  return DispatchReal(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* w = out->mutable_data<T>().data();
    std::fill_n(w, bins * mels, T(0));
    const auto set = [&](int64_t bin, int64_t m, double v) -> Status {
      if (bin < 0 || bin >= bins) {
        return InvalidArgument("MelWeightMatrix: the band edges run past the " + std::to_string(bins) +
                               " spectrogram bins (upper_edge_hertz above half the sample rate?)");
      }
      w[bin * mels + m] = static_cast<T>(v);
      return Status::Ok();
    };
    for (int64_t m = 0; m < mels; ++m) {
      const int64_t left = edge[static_cast<size_t>(m)], center = edge[static_cast<size_t>(m + 1)],
                    right = edge[static_cast<size_t>(m + 2)];
      if (center == left) {
        LS_RETURN_IF_ERROR(set(center, m, 1.0));
      } else {
        for (int64_t j = left; j <= center; ++j) {
          LS_RETURN_IF_ERROR(set(j, m, static_cast<double>(j - left) / static_cast<double>(center - left)));
        }
      }
      for (int64_t j = center; j < right; ++j) {
        LS_RETURN_IF_ERROR(set(j, m, static_cast<double>(right - j) / static_cast<double>(right - center)));
      }
    }
    return Status::Ok();
  });
}

}  // namespace

void RegisterSignalOps(OpRegistry& registry) {
  (void)registry.Register(SimpleOpDef("HannWindow", 1, InferWindow<WindowKind::kHann>, WindowKernel<WindowKind::kHann>));
  (void)registry.Register(
      SimpleOpDef("HammingWindow", 1, InferWindow<WindowKind::kHamming>, WindowKernel<WindowKind::kHamming>));
  (void)registry.Register(
      SimpleOpDef("BlackmanWindow", 1, InferWindow<WindowKind::kBlackman>, WindowKernel<WindowKind::kBlackman>));
  OpDef dft = SimpleOpDef("DFT", 1, InferDft, DftKernel);
  dft.max_inputs = 2;
  (void)registry.Register(std::move(dft));
  (void)registry.Register(SimpleOpDef("STFT", 4, InferStft, StftKernel));
  (void)registry.Register(SimpleOpDef("MelWeightMatrix", 5, InferMelWeightMatrix, MelWeightMatrixKernel));
}

}  // namespace lockstep
