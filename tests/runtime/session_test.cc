#include "runtime/session.h"

#include <gtest/gtest.h>

#include <span>
#include <thread>

#include "graph_test_util.h"
#include "runtime/graph_builder.h"
#include "runtime/op_registry.h"

namespace lockstep {
namespace {

using testing::Mlp;
using testing::OneInOneOut;
using testing::RandomTensor;

Model HalfPlusTwo() {
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, Shape{-1});
  std::string y = g.Op("Add", {g.Op("Mul", {x, g.Const("a", Tensor::Scalar(0.5f))}), g.Const("b", Tensor::Scalar(2.0f))}, {}, "y");
  g.AddSignature(OneInOneOut(x, Shape{-1}, y, Shape{-1}));
  return std::move(g).Build();
}

std::unique_ptr<Session> MustCreate(Model m, SessionOptions options = {}) {
  auto s = Session::Create(std::move(m), options);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(Session, RunsHalfPlusTwo) {
  auto session = MustCreate(HalfPlusTwo());
  std::vector<NamedTensor> in = {{"x", Tensor::FromVector<float>(Shape{3}, {1, 2, 5})}}, out;
  ASSERT_TRUE(session->Run("serving_default", in, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].name, "y");
  EXPECT_TRUE(out[0].tensor.BitwiseEqual(Tensor::FromVector<float>(Shape{3}, {2.5f, 3.0f, 4.5f})));
}

TEST(Session, BatchOfZeroAndOne) {
  auto session = MustCreate(Mlp({5, 7, 3}, 1));
  for (int64_t batch : {0, 1}) {
    std::vector<NamedTensor> in = {{"x", Tensor(DType::kFloat32, Shape{batch, 5})}}, out;
    Status s = session->Run("serving_default", in, &out);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(out[0].tensor.shape() == (Shape{batch, 3}));
  }
}

TEST(Session, RejectsBadInputsWithClearErrors) {
  auto session = MustCreate(Mlp({4, 3}, 2));
  std::vector<NamedTensor> out;
  auto run = [&](std::vector<NamedTensor> in, std::string sig = "serving_default") {
    return session->Run(sig, in, &out);
  };
  Status s = run({});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("missing input 'x'"), std::string::npos) << s.message();
  s = run({{"x", Tensor(DType::kInt32, Shape{1, 4})}});
  EXPECT_NE(s.message().find("must be float32"), std::string::npos) << s.message();
  s = run({{"x", Tensor(DType::kFloat32, Shape{1, 5})}});
  EXPECT_NE(s.message().find("shape [-1,4]"), std::string::npos) << s.message();
  s = run({{"x", Tensor(DType::kFloat32, Shape{1, 4})}, {"z", Tensor(DType::kFloat32, Shape{1})}});
  EXPECT_NE(s.message().find("no input 'z'"), std::string::npos) << s.message();
  s = run({{"x", Tensor(DType::kFloat32, Shape{1, 4})}, {"x", Tensor(DType::kFloat32, Shape{1, 4})}});
  EXPECT_NE(s.message().find("given twice"), std::string::npos) << s.message();
  s = run({{"x", Tensor(DType::kFloat32, Shape{1, 4})}}, "nope");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  // The session still works after every rejection.
  EXPECT_TRUE(run({{"x", Tensor(DType::kFloat32, Shape{2, 4})}}).ok());
}

TEST(Session, RunTimeShapeErrorsAreReportedNotCrashes) {
  // Two inputs whose batch sizes must agree only at run time.
  GraphBuilder g;
  g.Input("a", DType::kFloat32, Shape{-1, 3});
  g.Input("b", DType::kFloat32, Shape{-1, 3});
  g.Op("Add", {"a", "b"}, {}, "sum");
  g.AddSignature({"serving_default", "", {{"a", "a", DType::kFloat32, Shape{-1, 3}}, {"b", "b", DType::kFloat32, Shape{-1, 3}}},
                  {{"sum", "sum", DType::kFloat32, Shape{-1, 3}}}});
  auto session = MustCreate(std::move(g).Build());
  std::vector<NamedTensor> out;
  std::vector<NamedTensor> in = {{"a", Tensor(DType::kFloat32, Shape{2, 3})}, {"b", Tensor(DType::kFloat32, Shape{5, 3})}};
  Status s = session->Run("serving_default", in, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("node 'sum'"), std::string::npos) << s.message();
}

TEST(Session, SignaturesRunOnlyWhatTheyNeed) {
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, Shape{-1});
  std::string doubled = g.Op("Add", {x, x}, {}, "doubled");
  std::string squared = g.Op("Mul", {x, x}, {}, "squared");
  g.AddSignature({"double", "", {{"x", x, DType::kFloat32, Shape{-1}}}, {{"y", doubled, DType::kFloat32, Shape{-1}}}});
  g.AddSignature({"both", "", {{"x", x, DType::kFloat32, Shape{-1}}},
                  {{"d", doubled, DType::kFloat32, Shape{-1}}, {"s", squared, DType::kFloat32, Shape{-1}}}});
  auto session = MustCreate(std::move(g).Build());
  std::vector<NamedTensor> in = {{"x", Tensor::FromVector<float>(Shape{2}, {3, 4})}}, out;
  ASSERT_TRUE(session->Run("both", in, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].name, "d");
  EXPECT_EQ(out[1].tensor.data<float>()[1], 16.0f);
  ASSERT_TRUE(session->Run("double", in, &out).ok());
  EXPECT_EQ(out[0].tensor.data<float>()[0], 6.0f);
}

TEST(Session, OutputsAreOwnedCopies) {
  auto session = MustCreate(Mlp({3, 4, 2}, 5));
  std::vector<NamedTensor> in = {{"x", Tensor::FromVector<float>(Shape{1, 3}, {1, 2, 3})}}, first, second;
  ASSERT_TRUE(session->Run("serving_default", in, &first).ok());
  Tensor kept = first[0].tensor.Clone();
  in[0].tensor = Tensor::FromVector<float>(Shape{1, 3}, {-3, 0, 9});
  ASSERT_TRUE(session->Run("serving_default", in, &second).ok());
  EXPECT_TRUE(first[0].tensor.BitwiseEqual(kept));  // not overwritten by the second run
}

// Passing the same output vector again writes the outputs in place when nothing else holds
// them (a training loop allocates no outputs), and never writes over a tensor the caller kept.
TEST(Session, ReusesTheCallersOutputTensorsOnlyWhenNobodyElseHoldsThem) {
  auto session = MustCreate(Mlp({3, 4, 2}, 5));
  std::vector<NamedTensor> in = {{"x", Tensor::FromVector<float>(Shape{1, 3}, {1, 2, 3})}}, out;
  ASSERT_TRUE(session->Run("serving_default", in, &out).ok());
  const void* storage = out[0].tensor.raw_data();
  in[0].tensor = Tensor::FromVector<float>(Shape{1, 3}, {-3, 0, 9});
  std::vector<NamedTensor> fresh;
  ASSERT_TRUE(session->Run("serving_default", in, &fresh).ok());
  ASSERT_TRUE(session->Run("serving_default", in, &out).ok());
  EXPECT_EQ(out[0].tensor.raw_data(), storage) << "written in place";
  EXPECT_TRUE(out[0].tensor.BitwiseEqual(fresh[0].tensor));

  const Tensor kept = out[0].tensor;  // shares the storage
  const Tensor kept_values = kept.Clone();
  in[0].tensor = Tensor::FromVector<float>(Shape{1, 3}, {1, 2, 3});
  ASSERT_TRUE(session->Run("serving_default", in, &out).ok());
  EXPECT_NE(out[0].tensor.raw_data(), storage) << "a shared tensor gets a new one";
  EXPECT_TRUE(kept.BitwiseEqual(kept_values)) << "what the caller kept is untouched";

  // Another batch size: a new tensor of the new shape.
  in[0].tensor = Tensor::FromVector<float>(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(session->Run("serving_default", in, &out).ok());
  EXPECT_EQ(out[0].tensor.shape(), (Shape{2, 2}));
}

// Eight threads calling Run at once on one Session get exactly the single-threaded answers.
TEST(Session, ConcurrentRunsMatchSingleThreaded) {
  ThreadPool pool(2);  // intra-op parallelism on top of the callers' threads
  SessionOptions options;
  options.pool = &pool;
  auto session = MustCreate(Mlp({64, 128, 10}, 9), options);
  constexpr int kThreads = 8, kRounds = 40;
  std::mt19937 rng(11);
  std::vector<Tensor> inputs, expected;
  for (int i = 0; i < kThreads; ++i) {
    inputs.push_back(RandomTensor(Shape{1 + 13 * i, 64}, rng));  // different batch per thread
    std::vector<NamedTensor> in = {{"x", inputs.back()}}, out;
    ASSERT_TRUE(session->Run("serving_default", in, &out).ok());
    expected.push_back(out[0].tensor);
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int r = 0; r < kRounds; ++r) {
        // Each thread alternates between its own input and a neighbour's.
        int which = (r % 2 == 0) ? i : (i + 1) % kThreads;
        std::vector<NamedTensor> in = {{"x", inputs[which]}}, out;
        if (!session->Run("serving_default", in, &out).ok() || !out[0].tensor.BitwiseEqual(expected[which])) {
          mismatches.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(Session, RejectsInvalidModels) {
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, Shape{-1});
  g.Op("NoSuchOp", {x}, {}, "y");
  g.AddSignature(OneInOneOut("x", Shape{-1}, "y", Shape{-1}));
  auto s = Session::Create(std::move(g).Build());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("unknown op 'NoSuchOp'"), std::string::npos);
}

TEST(Session, ShapesTooLargeToHoldAreRejectedAtCompileTime) {
  // A zero dimension must not hide an overflowing product of the others.
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, Shape{-1, 0});
  std::string w = g.Const("w", Tensor(DType::kFloat32, Shape{0, int64_t{1} << 62}));
  g.Op("MatMul", {x, w}, {}, "y");
  g.AddSignature(OneInOneOut(x, Shape{-1, 0}, "y", Shape{-1, int64_t{1} << 62}));
  auto s = Session::Create(std::move(g).Build());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("elements"), std::string::npos) << s.status().message();

  GraphBuilder h;
  h.Input("x", DType::kFloat32, Shape{-1});
  std::string a = h.Const("a", Tensor(DType::kFloat32, Shape{int64_t{1} << 32, 0}));
  std::string b = h.Const("b", Tensor(DType::kFloat32, Shape{0, int64_t{1} << 32}));
  h.Op("MatMul", {a, b}, {}, "y");
  h.AddSignature(OneInOneOut("x", Shape{-1}, "y", Shape{int64_t{1} << 32, int64_t{1} << 32}));
  EXPECT_FALSE(Session::Create(std::move(h).Build()).ok());
}

TEST(Session, RequestsBeyondTheMemoryBudgetFailAlone) {
  // A broadcast turns two small inputs into a large output.
  GraphBuilder g;
  g.Input("a", DType::kFloat32, Shape{-1, 1});
  g.Input("b", DType::kFloat32, Shape{1, -1});
  g.Op("Add", {"a", "b"}, {}, "sum");
  g.AddSignature({"serving_default", "", {{"a", "a", DType::kFloat32, Shape{-1, 1}}, {"b", "b", DType::kFloat32, Shape{1, -1}}},
                  {{"sum", "sum", DType::kFloat32, Shape{-1, -1}}}});
  SessionOptions options;
  options.max_bytes_per_run = 1 << 20;
  auto session = MustCreate(std::move(g).Build(), options);
  std::vector<NamedTensor> out;
  std::vector<NamedTensor> big = {{"a", Tensor(DType::kFloat32, Shape{1024, 1})}, {"b", Tensor(DType::kFloat32, Shape{1, 1024})}};
  Status s = session->Run("serving_default", big, &out);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  std::vector<NamedTensor> small = {{"a", Tensor(DType::kFloat32, Shape{16, 1})}, {"b", Tensor(DType::kFloat32, Shape{1, 16})}};
  EXPECT_TRUE(session->Run("serving_default", small, &out).ok());
  // RunOp (constant folding, tests) has a fixed per-tensor limit.
  EXPECT_EQ(RunOp("Add", std::vector<Tensor>{Tensor(DType::kFloat32, Shape{1 << 21, 1}), Tensor(DType::kFloat32, Shape{1, 1 << 20})})
                .status().code(), StatusCode::kResourceExhausted);
}

TEST(Session, EveryInputASignatureNeedsMustBeBound) {
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, Shape{-1});
  std::string z = g.Input("z", DType::kFloat32, Shape{-1});
  g.Op("Add", {x, z}, {}, "y");
  g.AddSignature(OneInOneOut(x, Shape{-1}, "y", Shape{-1}));  // z is needed but not bound
  auto s = Session::Create(std::move(g).Build());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("Input node 'z'"), std::string::npos) << s.status().message();
}

TEST(Session, InputsMatchTheNodeShapeAndAreBoundOnce) {
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, Shape{2});
  g.Op("Relu", {x}, {}, "y");
  g.AddSignature(OneInOneOut(x, Shape{-1}, "y", Shape{-1}));  // looser than the node
  auto session = MustCreate(g.model());
  std::vector<NamedTensor> out, in = {{"x", Tensor(DType::kFloat32, Shape{7})}};
  Status s = session->Run("serving_default", in, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("shape [2]"), std::string::npos) << s.message();

  Model twice = g.model();
  twice.graph.signatures[0].inputs.push_back({"x2", "x", DType::kFloat32, Shape{-1}});
  auto t = Session::Create(twice);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("another input"), std::string::npos) << t.status().message();
}

// Constant weight matrices of MatMul, FusedMatMul and Conv2D are packed once, when the session
// is built, and shared by every signature; the packed runs answer exactly as the ops do on
// their own (which pack per call).
TEST(Session, PacksEachConstantWeightOnceForAllSignatures) {
  std::mt19937 rng(3);
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, Shape{-1, 40});
  Tensor w0 = RandomTensor(Shape{40, 70}, rng), w1 = RandomTensor(Shape{33, 70}, rng);
  Tensor bias = RandomTensor(Shape{70}, rng);
  std::string h = g.Op("Relu", {g.Op("BiasAdd", {g.Op("MatMul", {x, g.Variable("w0", w0)}), g.Const("b", bias)})});
  std::string y = g.Op("MatMul", {h, g.Const("w1", w1)}, {{"transpose_b", true}}, "y");
  Signature sig = OneInOneOut(x, Shape{-1, 40}, y, Shape{-1, 33});
  g.AddSignature(sig);
  sig.name = "hidden";
  sig.outputs[0].tensor = h;
  sig.outputs[0].shape = Shape{-1, 70};
  g.AddSignature(sig);
  auto session = MustCreate(std::move(g).Build());
  ASSERT_NE(session, nullptr);
  // w0 as float32 words, 40 x (70 rounded up to 96 columns); w1 as 70 x 64.
  EXPECT_EQ(session->packed_weight_bytes(), (40 * 96 + 70 * 64) * sizeof(float));

  Tensor in = RandomTensor(Shape{5, 40}, rng);
  std::vector<NamedTensor> out;
  ASSERT_TRUE(session->Run("serving_default", std::vector<NamedTensor>{{"x", in}}, &out).ok());
  auto step = [](std::string_view op, std::vector<Tensor> inputs, AttrMap attrs = {}) {
    auto r = RunOp(op, inputs, attrs);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? (*r)[0] : Tensor();
  };
  Tensor want = step("MatMul", {in, w0});
  want = step("Relu", {step("BiasAdd", {want, bias})});
  want = step("MatMul", {want, w1}, {{"transpose_b", true}});
  EXPECT_TRUE(out[0].tensor.BitwiseEqual(want));
}

// A session of one Conv2D with a constant filter, released (release_packed_weights) or not:
// how many bytes it packs, whether the filter keeps its data, and that its answer on a batch of
// two is RunOp's (which packs per call), bit for bit.
void ExpectConstantFilterPacking(const Shape& image, const Shape& filter_shape, const AttrMap& attrs,
                                 size_t packed_bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  GraphBuilder g;
  Shape batch_image = image;
  batch_image.set_dim(0, -1);
  std::string x = g.Input("x", DType::kFloat32, batch_image);
  Tensor filter = RandomTensor(filter_shape, rng);
  std::string y = g.Op("Conv2D", {x, g.Const("f", filter)}, attrs, "y");
  Tensor in = RandomTensor(image, rng);
  auto want = RunOp("Conv2D", std::vector<Tensor>{in, filter}, attrs);
  ASSERT_TRUE(want.ok());
  Shape batch_out = (*want)[0].shape();
  batch_out.set_dim(0, -1);
  g.AddSignature(OneInOneOut(x, batch_image, y, batch_out));
  const Model model = std::move(g).Build();
  for (bool release : {false, true}) {
    SessionOptions options;
    options.release_packed_weights = release;
    auto session = MustCreate(model, options);
    ASSERT_NE(session, nullptr);
    EXPECT_EQ(session->packed_weight_bytes(), packed_bytes);
    // Released, a filter read only packed loses its data; one read as it is keeps it.
    EXPECT_EQ(session->model().weights.at("f").raw_data() == nullptr, release && packed_bytes > 0);
    std::vector<NamedTensor> out;
    ASSERT_TRUE(session->Run("serving_default", std::vector<NamedTensor>{{"x", in}}, &out).ok());
    EXPECT_TRUE(out[0].tensor.BitwiseEqual((*want)[0])) << release;
  }
}

// The Gemm's packing, [KH * KW * Cin, Cout] with Cout in panels of 32.
TEST(Session, PacksConstantConvolutionFilters) {
  ExpectConstantFilterPacking(Shape{2, 6, 6, 3}, Shape{3, 3, 3, 8}, {{"padding", std::string("SAME")}},
                              27 * 32 * sizeof(float), 4);
}

// A stem's filter (3 input channels, 16 output channels) runs without the Gemm (conv_direct.h):
// the session leaves it unpacked and keeps its data.
TEST(Session, KeepsStemFiltersUnpacked) {
  ExpectConstantFilterPacking(Shape{2, 9, 9, 3}, Shape{3, 3, 3, 16},
                              {{"padding", std::string("SAME")}, {"strides", std::vector<int64_t>{2, 2}}}, 0, 5);
}

// A Winograd layer's filter (3x3, stride 1, 32 channels) is packed transformed: 16 products'
// B side by side, 32 x (16 x 32) floats.
TEST(Session, PacksWinogradFiltersTransformed) {
  ExpectConstantFilterPacking(Shape{2, 6, 7, 32}, Shape{3, 3, 32, 32}, {{"padding", std::string("SAME")}},
                              32 * 16 * 32 * sizeof(float), 6);
}

// A filter fed per call (training's) is packed by the op; a constant one by the session. The
// two give the same bits: float32, and bf16 (the image rounded once, its columns read in place
// by the matmul core where they hold whole pairs, packed where not), every padding, windows not
// square, a layer whose K is too deep to read A in place, and FusedConv2D's bias, residual and
// activation.
TEST(Session, ConstantAndFedConvolutionFiltersGiveTheSameBits) {
  struct Case {
    const char* op;
    Shape image, filter;
    AttrMap attrs;
  };
  const AttrMap same{{"padding", std::string("SAME")}};
  const AttrMap asymmetric{{"padding", std::string("EXPLICIT")},
                           {"explicit_paddings", std::vector<int64_t>{0, 0, 2, 1, 0, 3, 0, 0}}};
  AttrMap bf16 = same, bf16_valid{{"padding", std::string("VALID")}}, fused = same;
  bf16.Set("precision", std::string("bfloat16"));
  bf16_valid.Set("precision", std::string("bfloat16"));
  fused.Set("activation", std::string("relu"));
  const Case cases[] = {
      {"Conv2D", {2, 7, 6, 5}, {3, 3, 5, 8}, same},
      {"Conv2D", {3, 8, 9, 4}, {3, 2, 4, 12}, asymmetric},
      {"Conv2D", {2, 5, 5, 200}, {3, 3, 200, 8}, same},  // K 1800: A packed
      {"Conv2D", {2, 6, 6, 16}, {3, 3, 16, 24}, bf16},
      {"Conv2D", {1, 5, 7, 6}, {2, 2, 6, 40}, bf16_valid},
      {"Conv2D", {2, 6, 6, 3}, {3, 3, 3, 8}, bf16},  // K 27: float32 columns rounded as packed
      {"FusedConv2D", {2, 6, 5, 8}, {3, 3, 8, 16}, fused},
  };
  uint32_t seed = 30;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.op) + " " + c.image.ToString() + " * " + c.filter.ToString());
    std::mt19937 rng(seed++);
    const Tensor filter = RandomTensor(c.filter, rng), bias = RandomTensor(Shape{c.filter.dim(3)}, rng);
    const Tensor in = RandomTensor(c.image, rng);
    const bool is_fused = std::string_view(c.op) == "FusedConv2D";
    auto conv = RunOp("Conv2D", std::vector<Tensor>{in, filter}, c.attrs);
    ASSERT_TRUE(conv.ok()) << conv.status().ToString();
    const Tensor residual = RandomTensor((*conv)[0].shape(), rng);
    std::vector<Tensor> fed = {in, filter};
    if (is_fused) fed = {in, filter, bias, residual};
    auto want = RunOp(c.op, fed, c.attrs);
    ASSERT_TRUE(want.ok()) << want.status().ToString();

    GraphBuilder g;
    std::string x = g.Input("x", DType::kFloat32, c.image);
    std::vector<std::string> inputs = {x, g.Const("f", filter)};
    if (is_fused) inputs.push_back(g.Const("b", bias));
    if (is_fused) inputs.push_back(g.Input("r", DType::kFloat32, residual.shape()));
    std::string y = g.Op(c.op, inputs, c.attrs, "y");
    Signature sig = OneInOneOut(x, c.image, y, (*want)[0].shape());
    if (is_fused) sig.inputs.push_back({"r", "r", DType::kFloat32, residual.shape()});
    g.AddSignature(sig);
    auto session = MustCreate(std::move(g).Build());
    ASSERT_NE(session, nullptr);
    EXPECT_GT(session->packed_weight_bytes(), 0u);
    std::vector<NamedTensor> feeds = {{"x", in}};
    if (is_fused) feeds.push_back({"r", residual});
    std::vector<NamedTensor> out;
    ASSERT_TRUE(session->Run("serving_default", feeds, &out).ok());
    EXPECT_TRUE(out[0].tensor.BitwiseEqual((*want)[0]));
  }
}

// A session with release_packed_weights, and whether each of `signatures` gives on `inputs`
// bitwise what a session of the same model without it gives.
std::unique_ptr<Session> ExpectReleasingChangesNoResult(const Model& model, std::span<const char* const> signatures,
                                                       const std::vector<NamedTensor>& inputs) {
  auto kept = MustCreate(model);
  SessionOptions options;
  options.release_packed_weights = true;
  auto released = MustCreate(model, options);
  if (kept == nullptr || released == nullptr) return nullptr;
  for (const char* signature : signatures) {
    std::vector<NamedTensor> want, got;
    EXPECT_TRUE(kept->Run(signature, inputs, &want).ok()) << signature;
    const Status run = released->Run(signature, inputs, &got);
    EXPECT_TRUE(run.ok()) << signature << ": " << run.ToString();
    if (!run.ok() || got.size() != want.size()) continue;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(got[i].tensor.BitwiseEqual(want[i].tensor)) << signature << i;
  }
  return released;
}

// release_packed_weights: weights read only packed lose their data, the rest keep it, and the
// runs' results do not change.
TEST(Session, ReleasesOnlyWeightsEveryRunReadsPacked) {
  std::mt19937 rng(5);
  GraphBuilder g;
  std::string x = g.Input("x", DType::kFloat32, Shape{-1, 40});
  Tensor w0 = RandomTensor(Shape{40, 70}, rng), w1 = RandomTensor(Shape{33, 70}, rng);
  Tensor bias = RandomTensor(Shape{70}, rng), w2 = RandomTensor(Shape{70, 5}, rng);
  std::string h = g.Op("Relu", {g.Op("BiasAdd", {g.Op("MatMul", {x, g.Variable("w0", w0)}), g.Const("b", bias)})});
  std::string y = g.Op("MatMul", {h, g.Const("w1", w1)}, {{"transpose_b", true}}, "y");
  // w2 is a product's operand and also a signature's output: its data is needed.
  std::string w2_node = g.Const("w2", w2);
  std::string z = g.Op("MatMul", {h, w2_node}, {}, "z");
  Signature sig = OneInOneOut(x, Shape{-1, 40}, y, Shape{-1, 33});
  g.AddSignature(sig);
  sig.name = "z_and_w2";
  sig.outputs = {{"z", z, DType::kFloat32, Shape{-1, 5}}, {"w2", w2_node, DType::kFloat32, Shape{70, 5}}};
  g.AddSignature(sig);
  const Model model = std::move(g).Build();
  Tensor in = RandomTensor(Shape{5, 40}, rng);
  const char* const signatures[] = {"serving_default", "z_and_w2"};
  auto released = ExpectReleasingChangesNoResult(model, signatures, {{"x", in}});
  ASSERT_NE(released, nullptr);
  const WeightMap& weights = released->model().weights;
  for (const std::string name : {"w0", "w1"}) {
    EXPECT_EQ(weights.at(name).raw_data(), nullptr) << name;
    EXPECT_EQ(weights.at(name).shape(), model.weights.at(name).shape()) << name;
    EXPECT_EQ(weights.at(name).dtype(), DType::kFloat32) << name;
  }
  EXPECT_TRUE(weights.at("b").BitwiseEqual(bias));
  EXPECT_TRUE(weights.at("w2").BitwiseEqual(w2));
  EXPECT_EQ(released->packed_weight_bytes(), MustCreate(model)->packed_weight_bytes());
}

// The weights a bundle reader hands over are views into one image of the file. Once the
// packed ones are released, the small ones still needed are copied out (read-only still) and
// nothing holds the image: it is freed. Without the option it stays.
TEST(Session, ReleasingPackedWeightsFreesTheImageTheyViewed) {
  std::mt19937 rng(7);
  const Tensor w = RandomTensor(Shape{64, 64}, rng), bias = RandomTensor(Shape{64}, rng);
  for (bool release : {true, false}) {
    auto image = std::make_shared<std::vector<float>>();
    image->insert(image->end(), w.data<float>().begin(), w.data<float>().end());
    image->insert(image->end(), bias.data<float>().begin(), bias.data<float>().end());
    std::weak_ptr<const void> alive = image;
    GraphBuilder g;
    std::string x = g.Input("x", DType::kFloat32, Shape{-1, 64});
    std::string y = g.Op("BiasAdd", {g.Op("MatMul", {x, g.Const("w", Tensor::View(DType::kFloat32, w.shape(),
                                                                                    image->data(), image))}),
                                     g.Const("b", Tensor::View(DType::kFloat32, bias.shape(), image->data() + 64 * 64,
                                                               image))}, {}, "y");
    g.AddSignature(OneInOneOut(x, Shape{-1, 64}, y, Shape{-1, 64}));
    Model model = std::move(g).Build();
    // An empty weight views the image too (a bundle's empty weights do), and must not keep it.
    model.weights["empty"] = Tensor::View(DType::kFloat32, Shape{0, 4}, image->data(), image);
    image.reset();
    SessionOptions options;
    options.release_packed_weights = release;
    auto session = MustCreate(std::move(model), options);
    ASSERT_NE(session, nullptr);
    EXPECT_EQ(alive.expired(), release);
    const Tensor& b = session->model().weights.at("b");
    EXPECT_TRUE(b.BitwiseEqual(bias));
    EXPECT_TRUE(b.read_only());
    Tensor in = RandomTensor(Shape{3, 64}, rng);
    std::vector<NamedTensor> out;
    ASSERT_TRUE(session->Run("serving_default", std::vector<NamedTensor>{{"x", in}}, &out).ok());
    auto product = RunOp("MatMul", std::vector<Tensor>{in, w});
    ASSERT_TRUE(product.ok());
    auto want = RunOp("BiasAdd", std::vector<Tensor>{(*product)[0], bias});
    ASSERT_TRUE(want.ok());
    EXPECT_TRUE(out[0].tensor.BitwiseEqual((*want)[0])) << release;
  }
}

// Weights may share storage (a bundle may give two entries one offset; constant folding
// reshapes a Const in place). Each keeps its own dtype and shape when released, and storage
// that one of them needs is kept for all.
TEST(Session, ReleasingWeightsThatShareStorageKeepsEachShape) {
  std::mt19937 rng(8);
  const Tensor values = RandomTensor(Shape{288}, rng);
  auto storage = std::make_shared<std::vector<float>>(values.data<float>().begin(), values.data<float>().end());
  const Tensor f1 = Tensor::View(DType::kFloat32, Shape{3, 3, 4, 8}, storage->data(), storage);
  const Tensor f2 = Tensor::View(DType::kFloat32, Shape{1, 1, 4, 72}, storage->data(), storage);
  for (bool f2_returned : {false, true}) {
    GraphBuilder g;
    std::string x = g.Input("x", DType::kFloat32, Shape{-1, 5, 5, 4});
    std::string f2_node = g.Const("f2", f2);
    std::string y1 = g.Op("Conv2D", {x, g.Const("f1", f1)}, {{"padding", std::string("SAME")}}, "y1");
    std::string y2 = g.Op("Conv2D", {x, f2_node}, {{"padding", std::string("SAME")}}, "y2");
    Signature sig = OneInOneOut(x, Shape{-1, 5, 5, 4}, y1, Shape{-1, 5, 5, 8});
    sig.outputs.push_back({"y2", y2, DType::kFloat32, Shape{-1, 5, 5, 72}});
    if (f2_returned) sig.outputs.push_back({"f2", f2_node, DType::kFloat32, Shape{1, 1, 4, 72}});
    g.AddSignature(sig);
    const Model model = std::move(g).Build();
    const char* const signatures[] = {"serving_default"};
    auto released = ExpectReleasingChangesNoResult(model, signatures, {{"x", RandomTensor(Shape{2, 5, 5, 4}, rng)}});
    ASSERT_NE(released, nullptr);
    const WeightMap& weights = released->model().weights;
    EXPECT_EQ(weights.at("f1").shape(), f1.shape());
    EXPECT_EQ(weights.at("f2").shape(), f2.shape());
    for (const char* name : {"f1", "f2"}) {
      EXPECT_EQ(weights.at(name).raw_data() == nullptr, !f2_returned) << name << " " << f2_returned;
    }
  }
}

}  // namespace
}  // namespace lockstep
