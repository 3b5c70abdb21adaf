// Pieces that several layer types are made of: their weights and their ops, so that a dense
// layer, a transformer's feed-forward and an attention's projections are one code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "training/layers/layer_kind.h"

namespace lockstep::training {

// prefix/kernel [in, out] (a product) and, with `bias`, prefix/bias [out] (zeros), appended to
// `weights`.
void AddDenseWeights(const std::string& prefix, int64_t in, int64_t out, const std::string& initializer,
                     std::vector<WeightInfo>& weights, bool bias = true);
// x [rows, in] times prefix/kernel, plus prefix/bias with `bias`; nodes named node + "/MatMul",
// "/BiasAdd".
std::string DenseOps(const LayerGraph& b, const std::string& x, const std::string& prefix, const std::string& node,
                     bool bias = true);
// y plus prefix/bias when the layer has one (LayerConfig::use_bias), named node + "/BiasAdd".
std::string BiasOps(const LayerGraph& b, const std::string& y, const std::string& prefix, const std::string& node,
                    bool bias);

// prefix/gamma and prefix/beta [d] (ones and zeros), appended to `weights`.
void AddNormWeights(const std::string& prefix, int64_t d, std::vector<WeightInfo>& weights);
// x normalised over its last axis, then scaled by prefix/gamma and offset by prefix/beta.
std::string LayerNormOps(const LayerGraph& b, const std::string& x, const std::string& prefix,
                         const std::string& node, double epsilon);

// The kernel of group g of a layer of `groups` (conv2d's groups): "<layer>/kernel" for one group,
// "<layer>/group_<g>/kernel" for several, each [k, k, in / groups, out / groups].
std::string GroupKernelName(const std::string& layer, int64_t groups, int64_t g);

// x reshaped to `dims` (-1 for the batch).
std::string ReshapeOps(const LayerGraph& b, const std::string& x, std::vector<int64_t> dims, const std::string& node);

}  // namespace lockstep::training
