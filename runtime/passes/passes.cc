#include "runtime/passes/passes.h"

namespace lockstep {

Status OptimizeGraph(Model& model, ThreadPool& pool, const OpRegistry& registry) {
  // Folding first exposes constant biases and weights to fusion; dead-node elimination last
  // removes what both left behind.
  LS_RETURN_IF_ERROR(FoldConstants(model, pool, registry));
  LS_RETURN_IF_ERROR(FuseMatMul(model, registry));
  LS_RETURN_IF_ERROR(EliminateDeadNodes(model, registry));
  return Status::Ok();
}

}  // namespace lockstep
