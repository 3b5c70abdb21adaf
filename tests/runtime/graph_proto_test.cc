#include "runtime/graph_proto.h"

#include <gtest/gtest.h>

#include "tests/runtime/bundle_test_util.h"

namespace lockstep {
namespace {

using testing_util::ConstModel;
using testing_util::IsError;

void ExpectGraphsEqual(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    EXPECT_EQ(a.nodes[i].name, b.nodes[i].name);
    EXPECT_EQ(a.nodes[i].op, b.nodes[i].op);
    EXPECT_EQ(a.nodes[i].inputs, b.nodes[i].inputs);
    EXPECT_TRUE(a.nodes[i].attrs == b.nodes[i].attrs) << a.nodes[i].name;
  }
  ASSERT_EQ(a.signatures.size(), b.signatures.size());
  for (size_t i = 0; i < a.signatures.size(); ++i) {
    const Signature& x = a.signatures[i];
    const Signature& y = b.signatures[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.method_name, y.method_name);
    for (const auto& [p, q] : {std::pair{&x.inputs, &y.inputs}, std::pair{&x.outputs, &y.outputs}}) {
      ASSERT_EQ(p->size(), q->size());
      for (size_t k = 0; k < p->size(); ++k) {
        EXPECT_EQ((*p)[k].key, (*q)[k].key);
        EXPECT_EQ((*p)[k].tensor, (*q)[k].tensor);
        EXPECT_EQ((*p)[k].dtype, (*q)[k].dtype);
        EXPECT_EQ((*p)[k].shape, (*q)[k].shape);
      }
    }
  }
  EXPECT_EQ(a.metadata, b.metadata);
}

TEST(GraphProtoTest, RoundTripKeepsEverything) {
  const Graph graph = ConstModel().graph;
  proto::BundleDef def;
  GraphToProto(graph, &def);
  // Through bytes too: what matters is what survives the file.
  proto::BundleDef parsed;
  ASSERT_TRUE(parsed.ParseFromString(def.SerializeAsString()));
  auto back = GraphFromProto(parsed);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectGraphsEqual(graph, *back);
}

TEST(GraphProtoTest, AttrsMapToTheirOneofCase) {
  Graph g;
  g.nodes.push_back({"n", "Op", {"a", "b:1"}, AttrMap{{"i", int64_t{3}}, {"f", 2.5}, {"s", std::string("x")},
                                                       {"b", false}, {"ints", std::vector<int64_t>{}},
                                                       {"floats", std::vector<double>{1.0}},
                                                       {"dtype", DType::kString}, {"shape", Shape{}}}});
  proto::BundleDef def;
  GraphToProto(g, &def);
  const auto& attrs = def.graph().nodes(0).attrs();
  EXPECT_EQ(attrs.at("i").value_case(), proto::AttrValue::kI);
  EXPECT_EQ(attrs.at("f").value_case(), proto::AttrValue::kF);
  EXPECT_EQ(attrs.at("s").value_case(), proto::AttrValue::kS);
  EXPECT_EQ(attrs.at("b").value_case(), proto::AttrValue::kB);
  EXPECT_EQ(attrs.at("ints").value_case(), proto::AttrValue::kInts);  // even when empty
  EXPECT_EQ(attrs.at("floats").value_case(), proto::AttrValue::kFloats);
  EXPECT_EQ(attrs.at("dtype").dtype(), proto::DT_STRING);
  EXPECT_EQ(attrs.at("shape").value_case(), proto::AttrValue::kShape);  // a scalar shape
  auto back = GraphFromProto(def);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->nodes[0].attrs == g.nodes[0].attrs);
  EXPECT_EQ(back->nodes[0].inputs, g.nodes[0].inputs);
}

TEST(GraphProtoTest, DTypeAndShapeHelpers) {
  for (DType d : {DType::kFloat32, DType::kBFloat16, DType::kInt32, DType::kInt64, DType::kBool, DType::kString,
                  DType::kFloat64, DType::kFloat16, DType::kUInt8, DType::kInt8, DType::kUInt16, DType::kInt16,
                  DType::kUInt32, DType::kUInt64}) {
    auto back = DTypeFromProto(DTypeToProto(d));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, d);
  }
  EXPECT_TRUE(IsError(DTypeFromProto(0).status(), StatusCode::kInvalidArgument, {"invalid dtype 0"}));
  EXPECT_TRUE(IsError(DTypeFromProto(15).status(), StatusCode::kInvalidArgument, {"invalid dtype 15"}));
  EXPECT_TRUE(IsError(DTypeFromProto(-1).status(), StatusCode::kInvalidArgument, {"invalid dtype -1"}));

  proto::ShapeProto sp;
  ShapeToProto(Shape{-1, 0, 5}, &sp);
  auto shape = ShapeFromProto(sp);
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(*shape, (Shape{-1, 0, 5}));
  sp.add_dims(-2);
  EXPECT_TRUE(IsError(ShapeFromProto(sp).status(), StatusCode::kInvalidArgument, {"-2"}));
  proto::ShapeProto deep;
  for (int i = 0; i < Shape::kMaxRank + 1; ++i) deep.add_dims(1);
  EXPECT_TRUE(IsError(ShapeFromProto(deep).status(), StatusCode::kInvalidArgument, {"rank 9"}));
}

proto::BundleDef SimpleDef() {
  proto::BundleDef def;
  GraphToProto(ConstModel().graph, &def);
  return def;
}

TEST(GraphProtoTest, RejectsInvalidDTypeInAttr) {
  proto::BundleDef def = SimpleDef();
  (*def.mutable_graph()->mutable_nodes(0)->mutable_attrs())["dtype"].set_dtype(static_cast<proto::DataType>(42));
  EXPECT_TRUE(IsError(GraphFromProto(def).status(), StatusCode::kInvalidArgument,
                      {"node 'x'", "attr 'dtype'", "invalid dtype 42"}));
}

TEST(GraphProtoTest, RejectsOverlongRankInAttr) {
  proto::BundleDef def = SimpleDef();
  auto* shape = (*def.mutable_graph()->mutable_nodes(0)->mutable_attrs())["shape"].mutable_shape();
  for (int i = 0; i < 20; ++i) shape->add_dims(1);
  EXPECT_TRUE(IsError(GraphFromProto(def).status(), StatusCode::kInvalidArgument,
                      {"node 'x'", "attr 'shape'", "exceeds the maximum"}));
}

TEST(GraphProtoTest, RejectsNegativeDimInAttr) {
  proto::BundleDef def = SimpleDef();
  (*def.mutable_graph()->mutable_nodes(0)->mutable_attrs())["shape"].mutable_shape()->set_dims(0, -5);
  EXPECT_TRUE(IsError(GraphFromProto(def).status(), StatusCode::kInvalidArgument,
                      {"node 'x'", "attr 'shape'", "-5"}));
}

TEST(GraphProtoTest, RejectsAttrWithoutValue) {
  proto::BundleDef def = SimpleDef();
  (*def.mutable_graph()->mutable_nodes(0)->mutable_attrs())["empty"];  // default: no oneof set
  EXPECT_TRUE(IsError(GraphFromProto(def).status(), StatusCode::kInvalidArgument,
                      {"node 'x'", "attr 'empty'", "has no value"}));
}

TEST(GraphProtoTest, RejectsInvalidSignatureDType) {
  proto::BundleDef def = SimpleDef();
  def.mutable_signatures(0)->mutable_outputs(1)->set_dtype(proto::DT_INVALID);
  EXPECT_TRUE(IsError(GraphFromProto(def).status(), StatusCode::kInvalidArgument,
                      {"signature 'serving_default'", "output 'labels'", "invalid dtype 0"}));
}

TEST(GraphProtoTest, RejectsBadSignatureShape) {
  proto::BundleDef def = SimpleDef();
  def.mutable_signatures(0)->mutable_inputs(0)->mutable_shape()->set_dims(1, -3);
  EXPECT_TRUE(IsError(GraphFromProto(def).status(), StatusCode::kInvalidArgument,
                      {"signature 'serving_default'", "input 'x'", "-3"}));
  proto::BundleDef deep = SimpleDef();
  for (int i = 0; i < 9; ++i) deep.mutable_signatures(1)->mutable_outputs(0)->mutable_shape()->add_dims(2);
  EXPECT_TRUE(IsError(GraphFromProto(deep).status(), StatusCode::kInvalidArgument,
                      {"signature 'counts'", "output 'n'", "rank 10"}));
}

TEST(GraphProtoTest, KeepsSignatureOrder) {
  Graph g;
  for (const char* name : {"zeta", "alpha", "mid"}) g.signatures.push_back({name, "", {}, {}});
  proto::BundleDef def;
  GraphToProto(g, &def);
  auto back = GraphFromProto(def);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->signatures.size(), 3u);
  EXPECT_EQ(back->signatures[0].name, "zeta");
  EXPECT_EQ(back->signatures[1].name, "alpha");
  EXPECT_EQ(back->signatures[2].name, "mid");
}

}  // namespace
}  // namespace lockstep
