// Internal to runtime/saved_model/: the translators of tf_shape_ops.cc that the table in
// tf_ops.cc lists.
#pragma once

#include <string>
#include <vector>

#include "runtime/saved_model/tf_ops.h"

namespace lockstep::tf_import {

Status Shape(TranslationContext& ctx, std::vector<std::string>* outputs);
Status StridedSlice(TranslationContext& ctx, std::vector<std::string>* outputs);
Status Pack(TranslationContext& ctx, std::vector<std::string>* outputs);
Status Fill(TranslationContext& ctx, std::vector<std::string>* outputs);
Status Pad(TranslationContext& ctx, std::vector<std::string>* outputs);
Status AddN(TranslationContext& ctx, std::vector<std::string>* outputs);
Status Square(TranslationContext& ctx, std::vector<std::string>* outputs);
Status Rsqrt(TranslationContext& ctx, std::vector<std::string>* outputs);
Status FusedBatchNorm(TranslationContext& ctx, std::vector<std::string>* outputs);
Status Transpose(TranslationContext& ctx, std::vector<std::string>* outputs);

}  // namespace lockstep::tf_import
