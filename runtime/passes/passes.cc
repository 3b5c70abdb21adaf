#include "runtime/passes/passes.h"

namespace lockstep {

Status OptimizeGraph(Model& model, ThreadPool& pool, const OpRegistry& registry) {
  // Layout changes sink first, so that folding and fusion see the graph without them; folding
  // then exposes constant biases and weights to fusion; dead-node elimination last removes
  // what all of them left behind.
  LS_RETURN_IF_ERROR(SinkLayoutChanges(model, registry));
  LS_RETURN_IF_ERROR(FoldConstants(model, pool, registry));
  LS_RETURN_IF_ERROR(FuseMatMul(model, registry));
  LS_RETURN_IF_ERROR(FuseLayerNormScaleOffset(model, registry));
  LS_RETURN_IF_ERROR(EliminateDeadNodes(model, registry));
  return Status::Ok();
}

}  // namespace lockstep
