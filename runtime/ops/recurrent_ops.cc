// The recurrent layers as ONNX defines them (and PyTorch exports them): RNN, GRU and LSTM,
// forward, reverse or bidirectional, with initial states, per-batch sequence lengths, clipping,
// any of ONNX's activation functions, LSTM's peepholes and input_forget, GRU's
// linear_before_reset, and both layouts ([seq, batch, ...] and [batch, seq, ...]).
//
//   RNN (x, W, R, B, sequence_lens, initial_h)                  -> Y, Y_h
//   GRU (x, W, R, B, sequence_lens, initial_h)                  -> Y, Y_h
//   LSTM(x, W, R, B, sequence_lens, initial_h, initial_c, P)    -> Y, Y_h, Y_c
//
// Every input after R is always given; an empty one is absent (the importer's). Gates are in
// ONNX's order (LSTM i, o, f, c; GRU z, r, h); W is [dirs, gates * H, input], R [dirs, gates * H,
// H], B [dirs, 2 * gates * H] (W's biases, then R's). Past a batch entry's length, Y is 0 and its
// state stays. Products in double: the layers are small beside the convolutions around them.
// float32 and float64.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/op_registry.h"
#include "runtime/ops/op_util.h"
#include "runtime/ops/ops.h"
#include "runtime/ops/shape_util.h"

namespace lockstep {
namespace {

enum class Cell { kRnn, kGru, kLstm };

constexpr std::string_view CellName(Cell c) { return c == Cell::kRnn ? "RNN" : c == Cell::kGru ? "GRU" : "LSTM"; }
constexpr int Gates(Cell c) { return c == Cell::kRnn ? 1 : c == Cell::kGru ? 3 : 4; }
constexpr int Inputs(Cell c) { return c == Cell::kLstm ? 8 : 6; }
constexpr int Outputs(Cell c) { return c == Cell::kLstm ? 3 : 2; }
constexpr int Activations(Cell c) { return c == Cell::kRnn ? 1 : c == Cell::kGru ? 2 : 3; }

// One of ONNX's activation functions, with its alpha and beta.
struct Activation {
  enum Kind { kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu,
              kSoftsign, kSoftplus } kind = kTanh;
  double alpha = 0, beta = 0;

  double operator()(double x) const {
    switch (kind) {
      case kRelu: return std::max(0.0, x);
      case kTanh: return std::tanh(x);
      case kSigmoid: return 1 / (1 + std::exp(-x));
      case kAffine: return alpha * x + beta;
      case kLeakyRelu: return x < 0 ? alpha * x : x;
      case kThresholdedRelu: return x > alpha ? x : 0;
      case kScaledTanh: return alpha * std::tanh(beta * x);
      case kHardSigmoid: return std::clamp(alpha * x + beta, 0.0, 1.0);
      case kElu: return x < 0 ? alpha * (std::exp(x) - 1) : x;
      case kSoftsign: return x / (1 + std::fabs(x));
      case kSoftplus: return std::log1p(std::exp(-std::fabs(x))) + std::max(x, 0.0);
    }
    return x;
  }
};

struct RecurrentParams {
  int directions = 1;
  bool reverse = false;  // forward only, reversed
  int64_t hidden = 0;
  double clip = 0;       // 0: none
  bool layout_batch_first = false;
  bool input_forget = false, linear_before_reset = false;
  std::array<Activation, 6> f{};  // per direction, Activations(cell) each
};

StatusOr<Activation> ParseActivation(std::string_view name, const double* alpha, const double* beta) {
  struct Named {
    std::string_view name;
    Activation::Kind kind;
    double alpha, beta;
  };
  static constexpr Named kNamed[] = {
      {"Relu", Activation::kRelu, 0, 0}, {"Tanh", Activation::kTanh, 0, 0}, {"Sigmoid", Activation::kSigmoid, 0, 0},
      {"Affine", Activation::kAffine, 1, 0}, {"LeakyRelu", Activation::kLeakyRelu, 0.01, 0},
      {"ThresholdedRelu", Activation::kThresholdedRelu, 1, 0}, {"ScaledTanh", Activation::kScaledTanh, 1, 1},
      {"HardSigmoid", Activation::kHardSigmoid, 0.2, 0.5}, {"Elu", Activation::kElu, 1, 0},
      {"Softsign", Activation::kSoftsign, 0, 0}, {"Softplus", Activation::kSoftplus, 0, 0}};
  for (const Named& n : kNamed) {
    if (n.name == name) return Activation{n.kind, alpha != nullptr ? *alpha : n.alpha, beta != nullptr ? *beta : n.beta};
  }
  return InvalidArgument("activation '" + Str(name) + "' is not one of ONNX's");
}

// The attrs: direction, hidden_size, clip, layout, input_forget, linear_before_reset, and the
// activations (attr "activations": names joined by ',', with "activation_alpha" and
// "activation_beta" double lists given to those that take them, in order).
StatusOr<RecurrentParams> ReadRecurrent(Cell cell, const AttrMap& attrs) {
  const std::string op(CellName(cell));
  RecurrentParams p;
  LS_ASSIGN_OR_RETURN(std::string_view direction, attrs.GetStringViewOr("direction", "forward"));
  if (direction == "bidirectional") p.directions = 2;
  else if (direction == "reverse") p.reverse = true;
  else if (direction != "forward") return InvalidArgument(op + ": direction must be forward, reverse or bidirectional");
  LS_ASSIGN_OR_RETURN(p.hidden, attrs.GetInt("hidden_size"));
  if (p.hidden < 1 || p.hidden > (int64_t{1} << 20)) return InvalidArgument(op + ": hidden_size must be in [1, 2^20]");
  LS_ASSIGN_OR_RETURN(p.clip, attrs.GetFloatOr("clip", 0.0));
  if (p.clip < 0) return InvalidArgument(op + ": clip must not be negative");
  LS_ASSIGN_OR_RETURN(p.layout_batch_first, IntFlag(attrs, "layout", false));
  LS_ASSIGN_OR_RETURN(p.input_forget, IntFlag(attrs, "input_forget", false));
  LS_ASSIGN_OR_RETURN(p.linear_before_reset, IntFlag(attrs, "linear_before_reset", false));
  LS_ASSIGN_OR_RETURN(std::string_view names, attrs.GetStringViewOr("activations", ""));
  std::array<std::string_view, 6> given{};
  size_t count = 0;
  for (size_t start = 0; start < names.size(); ++count) {
    const size_t comma = names.find(',', start);
    if (count == given.size()) return InvalidArgument(op + ": more than 6 activations");
    given[count] = names.substr(start, comma == std::string_view::npos ? names.size() - start : comma - start);
    start = comma == std::string_view::npos ? names.size() : comma + 1;
  }
  const int per = Activations(cell);
  if (count > 0 && static_cast<int>(count) != per * p.directions) {
    return InvalidArgument(op + ": " + std::to_string(count) + " activations for " + std::to_string(per) +
                           " per direction");
  }
  static constexpr std::string_view kDefaults[] = {"Sigmoid", "Tanh", "Tanh"};
  std::span<const double> alphas, betas;
  if (attrs.Has("activation_alpha")) {
    LS_ASSIGN_OR_RETURN(alphas, attrs.GetFloats("activation_alpha"));
  }
  if (attrs.Has("activation_beta")) {
    LS_ASSIGN_OR_RETURN(betas, attrs.GetFloats("activation_beta"));
  }
  size_t next_alpha = 0, next_beta = 0;
  for (int d = 0; d < p.directions; ++d) {
    for (int k = 0; k < per; ++k) {
      const std::string_view name = count == 0 ? (cell == Cell::kRnn ? "Tanh" : kDefaults[k]) : given[static_cast<size_t>(d * per + k)];
      const bool takes_alpha = name == "Affine" || name == "LeakyRelu" || name == "ThresholdedRelu" ||
                               name == "ScaledTanh" || name == "HardSigmoid" || name == "Elu";
      const bool takes_beta = name == "Affine" || name == "ScaledTanh" || name == "HardSigmoid";
      const double* alpha = takes_alpha && next_alpha < alphas.size() ? &alphas[next_alpha++] : nullptr;
      const double* beta = takes_beta && next_beta < betas.size() ? &betas[next_beta++] : nullptr;
      StatusOr<Activation> f = ParseActivation(name, alpha, beta);
      if (!f.ok()) return f.status().WithPrefix(op);
      p.f[static_cast<size_t>(d * per + k)] = *f;
    }
  }
  return p;
}

template <Cell C>
StatusOr<std::vector<TensorSpec>> InferRecurrent(const ShapeInferenceContext& ctx) {
  const std::string op(CellName(C));
  LS_RETURN_IF_ERROR(CheckInputCount(op, ctx.inputs.size(), Inputs(C), Inputs(C)));
  LS_ASSIGN_OR_RETURN(RecurrentParams p, ReadRecurrent(C, ctx.attrs));
  const TensorSpec& x = ctx.inputs[0];
  LS_RETURN_IF_ERROR(CheckReal(op, "x", x.dtype));
  LS_RETURN_IF_ERROR(CheckRank(op, "x", x.shape, 3));
  const int64_t seq = x.shape.dim(p.layout_batch_first ? 1 : 0), batch = x.shape.dim(p.layout_batch_first ? 0 : 1);
  const Shape y = p.layout_batch_first ? Shape{batch, seq, p.directions, p.hidden} : Shape{seq, p.directions, batch, p.hidden};
  const Shape state = p.layout_batch_first ? Shape{batch, p.directions, p.hidden} : Shape{p.directions, batch, p.hidden};
  std::vector<TensorSpec> out{{x.dtype, y}, {x.dtype, state}};
  if (C == Cell::kLstm) out.push_back({x.dtype, state});
  return out;
}

template <typename T>
double Value(const Tensor& t, int64_t i) {
  return static_cast<double>(t.data<T>()[static_cast<size_t>(i)]);
}

template <Cell C, typename T>
Status RunRecurrent(KernelContext& ctx, const RecurrentParams& p, std::span<Tensor*> outs) {
  const std::string op(CellName(C));
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor& r = ctx.input(2);
  const Tensor& b = ctx.input(3);
  const Tensor& lens = ctx.input(4);
  const Tensor& h0 = ctx.input(5);
  const int64_t seq = x.shape().dim(p.layout_batch_first ? 1 : 0), batch = x.shape().dim(p.layout_batch_first ? 0 : 1);
  const int64_t in = x.shape().dim(2), hs = p.hidden, g = Gates(C), dirs = p.directions;
  auto bad = [&](const std::string& what) { return InvalidArgument(op + ": " + what); };
  if (!(w.shape() == Shape{dirs, g * hs, in}) || !(r.shape() == Shape{dirs, g * hs, hs})) {
    return bad("W " + w.shape().ToString() + " and R " + r.shape().ToString() + " do not fit x " + x.shape().ToString() +
               " and hidden_size " + std::to_string(hs));
  }
  if (w.dtype() != x.dtype() || r.dtype() != x.dtype()) return bad("W and R must have x's dtype");
  const bool has_b = b.num_elements() > 0, has_h0 = h0.num_elements() > 0;
  if (has_b && (b.dtype() != x.dtype() || !(b.shape() == Shape{dirs, 2 * g * hs}))) return bad("B must be [dirs, 2 * gates * H]");
  const Shape state_shape = p.layout_batch_first ? Shape{batch, dirs, hs} : Shape{dirs, batch, hs};
  if (has_h0 && (h0.dtype() != x.dtype() || !(h0.shape() == state_shape))) return bad("initial_h must be " + state_shape.ToString());
  const Tensor* c0 = C == Cell::kLstm && ctx.input(6).num_elements() > 0 ? &ctx.input(6) : nullptr;
  const Tensor* peep = C == Cell::kLstm && ctx.input(7).num_elements() > 0 ? &ctx.input(7) : nullptr;
  if (c0 != nullptr && (c0->dtype() != x.dtype() || !(c0->shape() == state_shape))) return bad("initial_c must be " + state_shape.ToString());
  if (peep != nullptr && (peep->dtype() != x.dtype() || !(peep->shape() == Shape{dirs, 3 * hs}))) return bad("P must be [dirs, 3 * H]");
  if (lens.num_elements() > 0 && (!IsIndexDType(lens.dtype()) || lens.num_elements() != batch)) {
    return bad("sequence_lens must hold one int per batch entry");
  }
  auto length = [&](int64_t e) -> int64_t {
    if (lens.num_elements() == 0) return seq;
    return lens.dtype() == DType::kInt32 ? int64_t{lens.data<int32_t>()[static_cast<size_t>(e)]} : lens.data<int64_t>()[static_cast<size_t>(e)];
  };
  for (int64_t e = 0; e < batch; ++e) {
    if (length(e) < 0 || length(e) > seq) return bad("sequence length " + std::to_string(length(e)) + " is outside [0, " + std::to_string(seq) + "]");
  }
  // Offsets in the layouts.
  auto x_at = [&](int64_t t, int64_t e) { return p.layout_batch_first ? (e * seq + t) * in : (t * batch + e) * in; };
  auto y_at = [&](int64_t t, int64_t d, int64_t e) {
    return p.layout_batch_first ? ((e * seq + t) * dirs + d) * hs : ((t * dirs + d) * batch + e) * hs;
  };
  auto state_at = [&](int64_t d, int64_t e) { return p.layout_batch_first ? (e * dirs + d) * hs : (d * batch + e) * hs; };
  T* y = outs[0]->mutable_data<T>().data();
  T* yh = outs[1]->mutable_data<T>().data();
  T* yc = C == Cell::kLstm ? outs[2]->mutable_data<T>().data() : nullptr;
  std::fill(y, y + outs[0]->num_elements(), T{});
  thread_local std::vector<double> scratch;
  scratch.assign(static_cast<size_t>(3 * hs + 2 * g * hs), 0.0);
  double* h = scratch.data();
  double* c = h + hs;
  double* gx = c + hs;       // x's part of the gates
  double* gh = gx + g * hs;  // h's part
  double* reset = gh + g * hs;
  auto clip = [&](double v) { return p.clip > 0 ? std::clamp(v, -p.clip, p.clip) : v; };
  for (int64_t d = 0; d < dirs; ++d) {
    const bool backward = d == 1 || p.reverse;
    const Activation* f = &p.f[static_cast<size_t>(d * Activations(C))];
    const T* wd = w.data<T>().data() + d * g * hs * in;
    const T* rd = r.data<T>().data() + d * g * hs * hs;
    for (int64_t e = 0; e < batch; ++e) {
      for (int64_t k = 0; k < hs; ++k) {
        h[k] = has_h0 ? Value<T>(h0, state_at(d, e) + k) : 0.0;
        c[k] = c0 != nullptr ? Value<T>(*c0, state_at(d, e) + k) : 0.0;
      }
      const int64_t steps = length(e);
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t t = backward ? steps - 1 - s : s;
        const T* xt = x.data<T>().data() + x_at(t, e);
        for (int64_t j = 0; j < g * hs; ++j) {
          double sx = has_b ? Value<T>(b, d * 2 * g * hs + j) : 0.0, sh = has_b ? Value<T>(b, d * 2 * g * hs + g * hs + j) : 0.0;
          for (int64_t k = 0; k < in; ++k) sx += static_cast<double>(wd[j * in + k]) * static_cast<double>(xt[k]);
          for (int64_t k = 0; k < hs; ++k) sh += static_cast<double>(rd[j * hs + k]) * h[k];
          gx[j] = sx;
          gh[j] = sh;
        }
        if constexpr (C == Cell::kRnn) {
          for (int64_t k = 0; k < hs; ++k) h[k] = f[0](clip(gx[k] + gh[k]));
        } else if constexpr (C == Cell::kGru) {
          // z, r, h. The candidate reads r (.) h before R (default) or r (.) (R h + Rb) after.
          for (int64_t k = 0; k < hs; ++k) reset[k] = f[0](clip(gx[hs + k] + gh[hs + k]));
          for (int64_t k = 0; k < hs; ++k) {
            const double z = f[0](clip(gx[k] + gh[k]));
            double candidate;
            if (p.linear_before_reset) {
              candidate = f[1](clip(gx[2 * hs + k] + reset[k] * gh[2 * hs + k]));
            } else {
              double s2 = has_b ? Value<T>(b, d * 2 * g * hs + g * hs + 2 * hs + k) : 0.0;
              for (int64_t m = 0; m < hs; ++m) s2 += static_cast<double>(rd[(2 * hs + k) * hs + m]) * reset[m] * h[m];
              candidate = f[1](clip(gx[2 * hs + k] + s2));
            }
            gx[k] = (1 - z) * candidate + z * h[k];  // the new state, kept aside until all are done
          }
          for (int64_t k = 0; k < hs; ++k) h[k] = gx[k];
        } else {
          // i, o, f, c with peepholes (P: i, o, f).
          for (int64_t k = 0; k < hs; ++k) {
            const double pi = peep != nullptr ? Value<T>(*peep, d * 3 * hs + k) : 0.0;
            const double po = peep != nullptr ? Value<T>(*peep, d * 3 * hs + hs + k) : 0.0;
            const double pf = peep != nullptr ? Value<T>(*peep, d * 3 * hs + 2 * hs + k) : 0.0;
            const double i = f[0](clip(gx[k] + gh[k] + pi * c[k]));
            const double fg = p.input_forget ? 1 - i : f[0](clip(gx[2 * hs + k] + gh[2 * hs + k] + pf * c[k]));
            const double candidate = f[1](clip(gx[3 * hs + k] + gh[3 * hs + k]));
            const double cell = fg * c[k] + i * candidate;
            const double o = f[0](clip(gx[hs + k] + gh[hs + k] + po * cell));
            c[k] = cell;
            gx[k] = o * f[2](cell);
          }
          for (int64_t k = 0; k < hs; ++k) h[k] = gx[k];
        }
        T* yt = y + y_at(t, d, e);
        for (int64_t k = 0; k < hs; ++k) yt[k] = static_cast<T>(h[k]);
      }
      for (int64_t k = 0; k < hs; ++k) {
        yh[state_at(d, e) + k] = static_cast<T>(h[k]);
        if (yc != nullptr) yc[state_at(d, e) + k] = static_cast<T>(c[k]);
      }
    }
  }
  return Status::Ok();
}

template <Cell C>
Status RecurrentKernel(KernelContext& ctx) {
  std::vector<TensorSpec> in;
  for (int i = 0; i < ctx.num_inputs(); ++i) in.push_back({ctx.input(i).dtype(), ctx.input(i).shape()});
  LS_ASSIGN_OR_RETURN(std::vector<TensorSpec> specs, InferRecurrent<C>({in, ctx.attrs()}));
  LS_ASSIGN_OR_RETURN(RecurrentParams p, ReadRecurrent(C, ctx.attrs()));
  std::array<Tensor*, 3> outs{};
  for (int k = 0; k < Outputs(C); ++k) {
    LS_ASSIGN_OR_RETURN(outs[static_cast<size_t>(k)], ctx.AllocateOutput(k, specs[static_cast<size_t>(k)].dtype,
                                                                          specs[static_cast<size_t>(k)].shape));
  }
  return DispatchReal(ctx.input(0).dtype(), [&](auto zero) {
    return RunRecurrent<C, decltype(zero)>(ctx, p, std::span<Tensor*>(outs.data(), static_cast<size_t>(Outputs(C))));
  });
}

template <Cell C>
OpDef RecurrentDef() {
  OpDef def = SimpleOpDef(std::string(CellName(C)), Inputs(C), InferRecurrent<C>, RecurrentKernel<C>);
  def.num_outputs = Outputs(C);
  return def;
}

}  // namespace

void RegisterRecurrentOps(OpRegistry& registry) {
  (void)registry.Register(RecurrentDef<Cell::kRnn>());
  (void)registry.Register(RecurrentDef<Cell::kGru>());
  (void)registry.Register(RecurrentDef<Cell::kLstm>());
}

}  // namespace lockstep
