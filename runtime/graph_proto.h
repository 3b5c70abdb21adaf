// Conversion between the in-memory graph (graph.h) and its protobuf form (bundle.proto).
// FromProto checks what the wire format cannot express (valid dtypes, ranks, dimension
// values) and names the node, attribute or signature at fault; it does not check the graph's
// meaning, which is AnalyzeGraph's job.
#pragma once

#include "proto/lockstep/bundle.pb.h"
#include "runtime/graph.h"

namespace lockstep {

void GraphToProto(const Graph& graph, proto::BundleDef* out);
StatusOr<Graph> GraphFromProto(const proto::BundleDef& in);

proto::DataType DTypeToProto(DType dtype);
StatusOr<DType> DTypeFromProto(int value);
void ShapeToProto(const Shape& shape, proto::ShapeProto* out);
StatusOr<Shape> ShapeFromProto(const proto::ShapeProto& in);

}  // namespace lockstep
