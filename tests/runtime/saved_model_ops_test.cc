// The SavedModel importer's op table beyond the half_plus_two models: hand-written TensorFlow
// graphs of the ops Keras models export (activations, reshaping, concatenation, convolution,
// pooling, batch normalisation, reductions, casts, argmax, shapes computed per request),
// translated and run, with answers worked out by hand;
// and what the table refuses, by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "runtime/saved_model/saved_model.h"
#include "runtime/session.h"
#include "tests/runtime/op_test_util.h"

namespace lockstep {
namespace {

// The one input "x" of a signature.
std::vector<NamedTensor> FeedX(Tensor x) { return {{"x", std::move(x)}}; }

// Builds a TensorFlow MetaGraphDef node by node.
class TfGraph {
 public:
  tensorflow::NodeDef* Node(const std::string& name, const std::string& op, std::vector<std::string> inputs = {}) {
    tensorflow::NodeDef* n = mg_.mutable_graph_def()->add_node();
    n->set_name(name);
    n->set_op(op);
    for (const std::string& in : inputs) n->add_input(in);
    return n;
  }
  void Placeholder(const std::string& name, std::vector<int64_t> dims) {
    Node(name, "Placeholder");
    inputs_[name] = dims;
  }
  template <typename T>
  void Const(const std::string& name, std::vector<int64_t> dims, std::vector<T> values) {
    tensorflow::NodeDef* n = Node(name, "Const");
    tensorflow::TensorProto* t = (*n->mutable_attr())["value"].mutable_tensor();
    for (int64_t d : dims) t->mutable_tensor_shape()->add_dim()->set_size(d);
    for (T v : values) {
      if constexpr (std::is_same_v<T, float>) {
        t->set_dtype(tensorflow::DT_FLOAT);
        t->add_float_val(v);
      } else {
        t->set_dtype(tensorflow::DT_INT32);
        t->add_int_val(v);
      }
    }
  }
  void Output(const std::string& key, const std::string& tensor, tensorflow::DataType dtype, int rank) {
    tensorflow::TensorInfo info;
    info.set_name(tensor);
    info.set_dtype(dtype);
    for (int i = 0; i < rank; ++i) info.mutable_tensor_shape()->add_dim()->set_size(-1);
    (*Signature().mutable_outputs())[key] = info;
  }
  tensorflow::MetaGraphDef Build() {
    for (const auto& [name, dims] : inputs_) {
      tensorflow::TensorInfo info;
      info.set_name(name + ":0");
      info.set_dtype(tensorflow::DT_FLOAT);
      for (int64_t d : dims) info.mutable_tensor_shape()->add_dim()->set_size(d);
      (*Signature().mutable_inputs())[name] = info;
    }
    return mg_;
  }

 private:
  tensorflow::SignatureDef& Signature() { return (*mg_.mutable_signature_def())["serving_default"]; }
  tensorflow::MetaGraphDef mg_;
  std::map<std::string, std::vector<int64_t>> inputs_;
};

void SetInts(tensorflow::NodeDef* n, const std::string& attr, std::vector<int64_t> values) {
  for (int64_t v : values) (*n->mutable_attr())[attr].mutable_list()->add_i(v);
}
void SetString(tensorflow::NodeDef* n, const std::string& attr, const std::string& value) {
  (*n->mutable_attr())[attr].set_s(value);
}
void SetInt(tensorflow::NodeDef* n, const std::string& attr, int64_t value) { (*n->mutable_attr())[attr].set_i(value); }
void SetBool(tensorflow::NodeDef* n, const std::string& attr, bool value) { (*n->mutable_attr())[attr].set_b(value); }

std::map<std::string, Tensor> ImportAndRun(const tensorflow::MetaGraphDef& mg, const std::string& input, const Tensor& x) {
  StatusOr<Model> model = ImportMetaGraph(mg, nullptr);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return {};
  StatusOr<std::unique_ptr<Session>> session = Session::Create(std::move(*model));
  EXPECT_TRUE(session.ok()) << session.status().ToString();
  if (!session.ok()) return {};
  std::vector<NamedTensor> outputs;
  const std::vector<NamedTensor> inputs{{input, x}};
  const Status s = (*session)->Run("serving_default", inputs, &outputs);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::map<std::string, Tensor> by_key;
  for (NamedTensor& t : outputs) by_key[t.name] = std::move(t.tensor);
  return by_key;
}

using op_test::Values;

TEST(SavedModelOpsTest, ActivationsReshapingConcatReductionsAndArgMax) {
  TfGraph g;
  g.Placeholder("x", {-1, 3});
  g.Node("relu6", "Relu6", {"x"});
  g.Const<int32_t>("axis_last", {}, {-1});
  g.Node("expanded", "ExpandDims", {"relu6", "axis_last"});  // [N, 3, 1]
  SetInts(g.Node("squeezed", "Squeeze", {"expanded"}), "squeeze_dims", {2});
  g.Node("elu", "Elu", {"x"});
  g.Node("selu", "Selu", {"x"});
  g.Const<int32_t>("axis_1", {}, {1});
  g.Node("concat", "ConcatV2", {"squeezed", "elu", "axis_1"});  // [N, 6]
  g.Const<int32_t>("reduce", {1}, {1});
  g.Node("mean", "Mean", {"concat", "reduce"});
  (*g.Node("argmax", "ArgMax", {"concat", "axis_1"})->mutable_attr())["output_type"].set_type(tensorflow::DT_INT32);
  (*g.Node("argmax_f", "Cast", {"argmax"})->mutable_attr())["DstT"].set_type(tensorflow::DT_FLOAT);
  g.Const<int32_t>("flat", {1}, {-1});
  g.Node("flattened", "Reshape", {"selu", "flat"});
  g.Node("group", "NoOp", {"^mean"});
  g.Output("mean", "mean:0", tensorflow::DT_FLOAT, 1);
  g.Output("class", "argmax:0", tensorflow::DT_INT32, 1);
  g.Output("class_f", "argmax_f:0", tensorflow::DT_FLOAT, 1);
  g.Output("selu", "flattened:0", tensorflow::DT_FLOAT, 1);

  const std::vector<float> x = {-1, 2, 8, 0.5f, 7, -3};
  auto out = ImportAndRun(g.Build(), "x", Tensor::FromVector<float>(Shape{2, 3}, x));
  ASSERT_EQ(out.size(), 4u);
  // Row 0: relu6 [0, 2, 6], elu [e^-1 - 1, 2, 8]; row 1: relu6 [0.5, 6, 0], elu [0.5, 7, e^-3 - 1].
  const double row0 = (0 + 2 + 6 + std::expm1(-1.0) + 2 + 8) / 6, row1 = (0.5 + 6 + 0 + 0.5 + 7 + std::expm1(-3.0)) / 6;
  ASSERT_EQ(out["mean"].shape(), (Shape{2}));
  EXPECT_NEAR(out.at("mean").data<float>()[0], row0, 1e-6);
  EXPECT_NEAR(out.at("mean").data<float>()[1], row1, 1e-6);
  EXPECT_EQ(Values<int32_t>(out["class"]), (std::vector<int32_t>{5, 4}));  // 8 (elu's), 7 (elu's)
  EXPECT_EQ(Values<float>(out["class_f"]), (std::vector<float>{5, 4}));
  const double scale = 1.0507009873554804934193349852946, alpha = 1.6732632423543772848170429916717;
  ASSERT_EQ(out["selu"].shape(), (Shape{6}));
  EXPECT_NEAR(out.at("selu").data<float>()[0], scale * alpha * std::expm1(-1.0), 1e-6);
  EXPECT_NEAR(out.at("selu").data<float>()[2], scale * 8, 1e-5);
}

TEST(SavedModelOpsTest, ConvolutionAndPooling) {
  TfGraph g;
  g.Placeholder("image", {-1, 2, 2, 1});
  g.Const<float>("filter", {1, 1, 1, 2}, {2, -1});  // two channels: 2x and -x
  tensorflow::NodeDef* conv = g.Node("conv", "Conv2D", {"image", "filter"});
  SetInts(conv, "strides", {1, 1, 1, 1});
  SetString(conv, "padding", "SAME");
  SetInts(conv, "dilations", {1, 1, 1, 1});
  for (const char* pool : {"MaxPool", "AvgPool"}) {
    tensorflow::NodeDef* p = g.Node(pool, pool, {"conv"});
    SetInts(p, "ksize", {1, 2, 2, 1});
    SetInts(p, "strides", {1, 2, 2, 1});
    SetString(p, "padding", "VALID");
    g.Output(pool, std::string(pool) + ":0", tensorflow::DT_FLOAT, 4);
  }
  auto out = ImportAndRun(g.Build(), "image", Tensor::FromVector<float>(Shape{1, 2, 2, 1}, {1, 2, 3, 4}));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out["MaxPool"].shape(), (Shape{1, 1, 1, 2}));
  EXPECT_EQ(Values<float>(out["MaxPool"]), (std::vector<float>{8, -1}));
  EXPECT_EQ(Values<float>(out["AvgPool"]), (std::vector<float>{5, -2.5}));
}

// A dilated Conv2D (atrous, as Keras's dilation_rate exports it): a 2x2 filter [1, 2; 3, 4]
// with taps 2 apart over x[r][c] = 5r + c + 1 gives x[i][j] + 2 x[i][j+2] + 3 x[i+2][j] +
// 4 x[i+2][j+2] = 92 + 10 (5i + j). With SAME padding the 3x3 extent keeps the 5x5 size.
TEST(SavedModelOpsTest, DilatedConvolution) {
  std::vector<float> x(25);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
  for (const char* padding : {"VALID", "SAME"}) {
    TfGraph g;
    g.Placeholder("image", {-1, 5, 5, 1});
    g.Const<float>("filter", {2, 2, 1, 1}, {1, 2, 3, 4});
    tensorflow::NodeDef* conv = g.Node("y", "Conv2D", {"image", "filter"});
    SetInts(conv, "strides", {1, 1, 1, 1});
    SetString(conv, "padding", padding);
    SetInts(conv, "dilations", {1, 2, 2, 1});
    g.Output("y", "y:0", tensorflow::DT_FLOAT, 4);
    auto out = ImportAndRun(g.Build(), "image", Tensor::FromVector<float>(Shape{1, 5, 5, 1}, x));
    ASSERT_EQ(out.size(), 1u);
    const bool same = std::string(padding) == "SAME";
    ASSERT_EQ(out["y"].shape(), same ? (Shape{1, 5, 5, 1}) : (Shape{1, 3, 3, 1}));
    const int64_t width = same ? 5 : 3;
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 3; ++j) {
        // SAME pads the 3x3 extent by one on each side: VALID's (i, j) is SAME's (i + 1, j + 1).
        const int64_t at = same ? (i + 1) * width + j + 1 : i * width + j;
        EXPECT_EQ(out["y"].data<float>()[at], 92 + 10 * (5 * i + j)) << padding << " " << i << "," << j;
      }
    }
  }
}

// Two channels, depth multiplier 2, a 2x2 window over a 2x2 image (VALID): each output is one
// channel's four pixels weighted by one of its filters. Pixels (c0, c1): (1, 10), (2, 20),
// (3, 30), (4, 40). Filters: c0 m0 all ones (10); c0 m1 only the top-left tap (1); c1 m0 -1 on
// the bottom-right tap (-40); c1 m1 all 0.5 (50).
TEST(SavedModelOpsTest, DepthwiseConvolution) {
  TfGraph g;
  g.Placeholder("image", {-1, 2, 2, 2});
  g.Const<float>("filter", {2, 2, 2, 2}, {1, 1, 0, 0.5, 1, 0, 0, 0.5, 1, 0, 0, 0.5, 1, 0, -1, 0.5});
  tensorflow::NodeDef* conv = g.Node("y", "DepthwiseConv2dNative", {"image", "filter"});
  SetInts(conv, "strides", {1, 1, 1, 1});
  SetString(conv, "padding", "VALID");
  SetInts(conv, "dilations", {1, 1, 1, 1});
  g.Output("y", "y:0", tensorflow::DT_FLOAT, 4);
  auto out = ImportAndRun(g.Build(), "image",
                          Tensor::FromVector<float>(Shape{1, 2, 2, 2}, {1, 10, 2, 20, 3, 30, 4, 40}));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out["y"].shape(), (Shape{1, 1, 1, 4}));
  EXPECT_EQ(Values<float>(out["y"]), (std::vector<float>{10, 1, -40, 50}));
}

// An input the SignatureDef declares without a shape takes its placeholder's, where that has a
// rank; with neither, a batch of elements.
TEST(SavedModelOpsTest, AnUndeclaredInputShapeComesFromItsPlaceholder) {
  TfGraph g;
  g.Placeholder("x", {});
  tensorflow::NodeDef* x = g.Node("shaped", "Placeholder");
  auto* shape = (*x->mutable_attr())["shape"].mutable_shape();
  shape->add_dim()->set_size(-1);
  shape->add_dim()->set_size(3);
  g.Const<float>("w", {3, 1}, {1, 2, 3});
  g.Node("y", "MatMul", {"shaped", "w"});
  g.Output("y", "y:0", tensorflow::DT_FLOAT, 2);
  g.Node("z", "Relu", {"x"});
  g.Output("z", "z:0", tensorflow::DT_FLOAT, 1);
  tensorflow::MetaGraphDef mg = g.Build();
  auto& inputs = *(*mg.mutable_signature_def())["serving_default"].mutable_inputs();
  inputs["shaped"].set_name("shaped:0");
  inputs["shaped"].set_dtype(tensorflow::DT_FLOAT);
  inputs["x"].clear_tensor_shape();
  StatusOr<Model> model = ImportMetaGraph(mg, nullptr);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Signature* sig = model->graph.FindSignature("serving_default");
  for (const TensorBinding& b : sig->inputs) {
    EXPECT_EQ(b.shape, b.key == "shaped" ? Shape({-1, 3}) : Shape({-1})) << b.key;
    EXPECT_TRUE(b.any_shape);
  }
}

// Keras's Conv2D -> BatchNormalization -> ReLU block: the batch normalisation is folded into
// one multiply and one add per channel at import.
TEST(SavedModelOpsTest, ConvolutionBatchNormalizationRelu) {
  TfGraph g;
  g.Placeholder("image", {-1, 2, 2, 1});
  g.Const<float>("filter", {1, 1, 1, 2}, {2, -1});  // channel 0: 2x, channel 1: -x
  tensorflow::NodeDef* conv = g.Node("conv", "Conv2D", {"image", "filter"});
  SetInts(conv, "strides", {1, 1, 1, 1});
  SetString(conv, "padding", "VALID");
  g.Const<float>("gamma", {2}, {1, 2});
  g.Const<float>("beta", {2}, {0.5f, 0});
  g.Const<float>("moving_mean", {2}, {1, 0});
  g.Const<float>("moving_variance", {2}, {3, 0.25f});
  tensorflow::NodeDef* bn = g.Node("bn", "FusedBatchNormV3", {"conv", "gamma", "beta", "moving_mean", "moving_variance"});
  SetBool(bn, "is_training", false);
  (*bn->mutable_attr())["epsilon"].set_f(0.001f);
  g.Node("relu", "Relu", {"bn"});
  g.Output("y", "relu:0", tensorflow::DT_FLOAT, 4);
  const std::vector<float> pixels = {1, -2, 0.25f, 3};
  auto out = ImportAndRun(g.Build(), "image", Tensor::FromVector<float>(Shape{1, 2, 2, 1}, pixels));
  ASSERT_EQ(out["y"].shape(), (Shape{1, 2, 2, 2}));
  for (size_t p = 0; p < pixels.size(); ++p) {
    const double v = pixels[p];
    const double c0 = (2 * v - 1) / std::sqrt(3.001) * 1 + 0.5, c1 = (-v - 0) / std::sqrt(0.251) * 2;
    EXPECT_NEAR(out["y"].data<float>()[2 * p], std::max(c0, 0.0), 1e-6) << p;
    EXPECT_NEAR(out["y"].data<float>()[2 * p + 1], std::max(c1, 0.0), 1e-6) << p;
  }
}

// Keras's Flatten with a batch it cannot know: Shape -> StridedSlice -> Pack -> Reshape, run
// for several batch sizes; and the element-wise ops that come with such graphs.
TEST(SavedModelOpsTest, AFlattenWhoseShapeIsComputedPerRequest) {
  TfGraph g;
  g.Placeholder("x", {-1, 2, 3});
  (*g.Node("shape", "Shape", {"x"})->mutable_attr())["out_type"].set_type(tensorflow::DT_INT32);
  g.Const<int32_t>("begin", {1}, {0});
  g.Const<int32_t>("end", {1}, {1});
  g.Const<int32_t>("stride", {1}, {1});
  SetInt(g.Node("batch", "StridedSlice", {"shape", "begin", "end", "stride"}), "shrink_axis_mask", 1);
  g.Const<int32_t>("minus_one", {}, {-1});
  g.Node("target", "Pack", {"batch", "minus_one"});
  g.Node("flat", "Reshape", {"x", "target"});                  // [N, 6]
  g.Node("sq", "Square", {"flat"});
  g.Node("sum", "AddN", {"flat", "sq", "flat"});               // 2x + x^2
  g.Const<float>("one", {}, {1});
  g.Node("clipped", "Maximum", {"sum", "one"});                 // >= 1
  g.Node("rs", "Rsqrt", {"clipped"});
  g.Const<float>("half", {}, {0.5f});
  g.Node("y", "Minimum", {"rs", "half"});
  g.Const<int32_t>("paddings", {2, 2}, {0, 0, 1, 0});
  g.Const<float>("pad_value", {}, {9});
  g.Node("padded", "PadV2", {"flat", "paddings", "pad_value"});  // [N, 7], 9 first
  g.Output("y", "y:0", tensorflow::DT_FLOAT, 2);
  g.Output("padded", "padded:0", tensorflow::DT_FLOAT, 2);
  StatusOr<Model> model = ImportMetaGraph(g.Build(), nullptr);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto session = Session::Create(std::move(*model));
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  for (int64_t batch : {1, 3}) {
    std::vector<float> x(static_cast<size_t>(batch * 6));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 2;
    std::vector<NamedTensor> outputs;
    ASSERT_TRUE((*session)->Run("serving_default", FeedX(Tensor::FromVector<float>(Shape{batch, 2, 3}, x)), &outputs).ok());
    std::map<std::string, Tensor> out;
    for (NamedTensor& t : outputs) out[t.name] = t.tensor;
    ASSERT_EQ(out["y"].shape(), (Shape{batch, 6}));
    ASSERT_EQ(out["padded"].shape(), (Shape{batch, 7}));
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      EXPECT_NEAR(out["y"].data<float>()[i], std::min(1 / std::sqrt(std::max(2 * v + v * v, 1.0)), 0.5), 1e-6) << i;
    }
    EXPECT_EQ(out["padded"].data<float>()[0], 9.0f);
    EXPECT_EQ(out["padded"].data<float>()[1], x[0]);
  }
}

TEST(SavedModelOpsTest, WhatCannotBeTranslatedIsRefusedByName) {
  auto error_of = [](auto&& build) {
    TfGraph g;
    g.Placeholder("x", {-1, 2, 2, 1});
    build(g);
    g.Output("y", "y:0", tensorflow::DT_FLOAT, 4);
    return ImportMetaGraph(g.Build(), nullptr).status().message();
  };
  std::string e = error_of([](TfGraph& g) {
    g.Const<float>("f", {1, 1, 1, 1, 1}, {1});
    g.Node("y", "Conv3D", {"x", "f"});
  });
  EXPECT_NE(e.find("op Conv3D is not supported"), std::string::npos) << e;
  e = error_of([](TfGraph& g) {
    tensorflow::NodeDef* conv = g.Node("y", "Conv2D", {"x", "x"});
    SetInts(conv, "strides", {1, 1, 1, 1});
    SetString(conv, "padding", "VALID");
    SetInts(conv, "dilations", {1, 2, 2, 1});
  });
  EXPECT_NE(e.find("node 'y' (op Conv2D): dilations of a filter that is not a constant"), std::string::npos) << e;
  e = error_of([](TfGraph& g) {
    g.Const<float>("f", {1, 1, 1, 1}, {1});
    tensorflow::NodeDef* conv = g.Node("y", "Conv2D", {"x", "f"});
    SetInts(conv, "strides", {1, 1, 1, 1});
    SetString(conv, "padding", "VALID");
    SetInts(conv, "dilations", {2, 1, 1, 1});
  });
  EXPECT_NE(e.find("dilations must be [1, h, w, 1]"), std::string::npos) << e;
  e = error_of([](TfGraph& g) {
    tensorflow::NodeDef* conv = g.Node("y", "Conv2D", {"x", "x"});
    SetInts(conv, "strides", {1, 1, 1, 1});
    SetString(conv, "padding", "EXPLICIT");
  });
  EXPECT_NE(e.find("padding 'EXPLICIT' is not supported"), std::string::npos) << e;
  e = error_of([](TfGraph& g) {
    g.Const<int32_t>("b", {1}, {0});
    SetInt(g.Node("y", "StridedSlice", {"x", "b", "b", "b"}), "ellipsis_mask", 1);
  });
  EXPECT_NE(e.find("node 'y' (op StridedSlice): ellipsis_mask"), std::string::npos) << e;
  e = error_of([](TfGraph& g) {
    g.Const<int32_t>("b", {1}, {-3});
    g.Const<int32_t>("end", {1}, {0});
    g.Const<int32_t>("s", {1}, {-1});
    g.Node("y", "StridedSlice", {"x", "b", "end", "s"});
  });
  EXPECT_NE(e.find("a negative stride from begin -3 is not supported"), std::string::npos) << e;
  e = error_of([](TfGraph& g) {
    g.Const<float>("s", {1}, {1});
    SetBool(g.Node("y", "FusedBatchNormV3", {"x", "s", "s", "s", "s"}), "is_training", true);
  });
  EXPECT_NE(e.find("is_training must be false"), std::string::npos) << e;
}

}  // namespace
}  // namespace lockstep
