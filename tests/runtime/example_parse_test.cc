// The tf.Example wire reader (example_wire.h) against protobuf's own serializer, and the
// ParseExampleFeature op built on it: defaults, required features, kinds and counts, and
// malformed bytes answered with an error.
#include <gtest/gtest.h>

#include "runtime/example_wire.h"
#include "runtime/op_registry.h"
#include "tensorflow/core/example/example.pb.h"

namespace lockstep {
namespace {

tensorflow::Example MakeExample(std::initializer_list<std::pair<std::string, std::vector<float>>> floats) {
  tensorflow::Example e;
  for (const auto& [key, values] : floats) {
    auto* list = (*e.mutable_features()->mutable_feature())[key].mutable_float_list();
    for (float v : values) list->add_value(v);
  }
  return e;
}

std::vector<float> Floats(std::string_view example, std::string_view key, size_t n) {
  StatusOr<ExampleFeature> f = FindExampleFeature(example, key);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  std::vector<float> out(n);
  Status s = ReadExampleFloats(*f, out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(ExampleWireTest, ReadsWhatProtobufWrites) {
  tensorflow::Example e = MakeExample({{"x", {1.5f, -2}}, {"other", {9}}});
  auto& features = *e.mutable_features()->mutable_feature();
  features["ids"].mutable_int64_list()->add_value(-7);
  features["ids"].mutable_int64_list()->add_value(int64_t{1} << 40);
  features["words"].mutable_bytes_list()->add_value("héllo");
  features["words"].mutable_bytes_list()->add_value(std::string("\0b", 2));
  const std::string bytes = e.SerializeAsString();

  EXPECT_EQ(Floats(bytes, "x", 2), (std::vector<float>{1.5f, -2}));
  StatusOr<ExampleFeature> ids = FindExampleFeature(bytes, "ids");
  ASSERT_TRUE(ids.ok());
  std::vector<int64_t> id_values(2);
  ASSERT_TRUE(ReadExampleInt64s(*ids, id_values).ok());
  EXPECT_EQ(id_values, (std::vector<int64_t>{-7, int64_t{1} << 40}));
  StatusOr<ExampleFeature> words = FindExampleFeature(bytes, "words");
  std::vector<std::string> word_values(2);
  ASSERT_TRUE(ReadExampleBytes(*words, word_values).ok());
  EXPECT_EQ(word_values, (std::vector<std::string>{"héllo", std::string("\0b", 2)}));

  EXPECT_EQ(FindExampleFeature(bytes, "missing")->kind, ExampleFeature::Kind::kAbsent);
  EXPECT_EQ(FindExampleFeature("", "x")->kind, ExampleFeature::Kind::kAbsent);  // the empty Example
  // The wrong kind, and the wrong count, name what they found.
  std::vector<float> one(1);
  Status wrong_kind = ReadExampleFloats(*ids, std::span<float>(one.data(), 1));
  EXPECT_NE(wrong_kind.message().find("int64_list"), std::string::npos) << wrong_kind.ToString();
  std::vector<float> three(3);
  Status wrong_count = ReadExampleFloats(*FindExampleFeature(bytes, "x"), three);
  EXPECT_NE(wrong_count.message().find("2 values, expected 3"), std::string::npos) << wrong_count.ToString();
}

TEST(ExampleWireTest, UnpackedValuesAndConcatenatedMessagesFollowProtobufsMerging) {
  // float_list with each value as its own fixed32 field (field 1, wire type 5), as older
  // writers emit: Example{features{feature{key:"x" value{float_list{value:1 value:2}}}}}.
  std::string list = "\x0d" + std::string("\x00\x00\x80\x3f", 4) + "\x0d" + std::string("\x00\x00\x00\x40", 4);
  std::string feature = "\x12" + std::string(1, char(list.size())) + list;
  std::string entry = "\x0a\x01x\x12" + std::string(1, char(feature.size())) + feature;
  std::string features = "\x0a" + std::string(1, char(entry.size())) + entry;
  std::string example = "\x0a" + std::string(1, char(features.size())) + features;
  EXPECT_EQ(Floats(example, "x", 2), (std::vector<float>{1, 2}));

  // A context followed by an example: TF Serving's way of feeding both. The example wins
  // where both have a feature; the context fills in the rest.
  const std::string merged = MakeExample({{"x", {1}}, {"shared", {7}}}).SerializeAsString() +
                             MakeExample({{"x", {2}}}).SerializeAsString();
  EXPECT_EQ(Floats(merged, "x", 1), (std::vector<float>{2}));
  EXPECT_EQ(Floats(merged, "shared", 1), (std::vector<float>{7}));

  // An entry whose Feature sets no list is passed over, as TensorFlow's parser does: the
  // context's value stands, and alone it is as if the feature were absent.
  tensorflow::Example no_list;
  (*no_list.mutable_features()->mutable_feature())["x"];
  EXPECT_EQ(FindExampleFeature(no_list.SerializeAsString(), "x")->kind, ExampleFeature::Kind::kAbsent);
  EXPECT_EQ(Floats(MakeExample({{"x", {3}}}).SerializeAsString() + no_list.SerializeAsString(), "x", 1),
            (std::vector<float>{3}));
}

TEST(ExampleWireTest, MalformedBytesAreErrorsNeverOverruns) {
  const std::string good = MakeExample({{"x", {1, 2, 3}}}).SerializeAsString();
  // Every prefix is either a valid message missing its tail or an error; none may crash or
  // read past its end (the sanitizer builds check the latter).
  for (size_t n = 0; n < good.size(); ++n) {
    StatusOr<ExampleFeature> f = FindExampleFeature(std::string_view(good.data(), n), "x");
    if (!f.ok()) continue;
    std::vector<float> out(3);
    (void)ReadExampleFloats(*f, out);
  }
  const std::string cases[] = {
      std::string("\x0b", 1),                  // a group (wire type 3)
      std::string("\x0a\x05\x0a\x03", 4),      // a length past the end
      std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11),  // an 11-byte varint
      std::string("\x00", 1),                  // field number 0
  };
  for (const std::string& c : cases) {
    EXPECT_FALSE(FindExampleFeature(c, "x").ok()) << testing::PrintToString(c);
  }
}

// model-train's reader learns widths from the data: it reads numeric lists of either kind as
// floats and counts them, and takes bytes as views. Varints of every length (the one- and
// two-byte ones take a shorter path) come out as protobuf wrote them.
TEST(ExampleWireTest, NumbersAsFloatsAndBytesAsViewsWithTheirCounts) {
  tensorflow::Example e;
  auto& f = *e.mutable_features()->mutable_feature();
  const std::vector<int64_t> ids = {0, 1, 127, 128, 255, 16383, 16384, 1 << 20, -1, int64_t{1} << 40, 5, 200};
  for (int64_t id : ids) f["ids"].mutable_int64_list()->add_value(id);
  for (float v : {0.5f, -2.0f}) f["x"].mutable_float_list()->add_value(v);
  f["name"].mutable_bytes_list()->add_value("dog");
  f["name"].mutable_bytes_list()->add_value("cat");
  const std::string bytes = e.SerializeAsString();

  std::vector<float> out(ids.size());
  StatusOr<int64_t> n = ReadExampleNumbersAsFloats(*FindExampleFeature(bytes, "ids"), out);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, static_cast<int64_t>(ids.size()));
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(out[i], static_cast<float>(ids[i])) << i;
  std::vector<float> two(2);
  EXPECT_EQ(ReadExampleNumbersAsFloats(*FindExampleFeature(bytes, "ids"), two).value(), 12);  // counted, 2 written
  EXPECT_EQ(two, (std::vector<float>{0, 1}));
  EXPECT_EQ(ReadExampleNumbersAsFloats(*FindExampleFeature(bytes, "x"), two).value(), 2);
  EXPECT_EQ(two, (std::vector<float>{0.5f, -2.0f}));
  EXPECT_FALSE(ReadExampleNumbersAsFloats(*FindExampleFeature(bytes, "name"), two).ok());
  EXPECT_FALSE(ReadExampleNumbersAsFloats(*FindExampleFeature(bytes, "absent"), two).ok());

  std::string_view first;
  EXPECT_EQ(ReadExampleBytesViews(*FindExampleFeature(bytes, "name"), std::span<std::string_view>(&first, 1)).value(), 2);
  EXPECT_EQ(first, "dog");
  EXPECT_FALSE(ReadExampleBytesViews(*FindExampleFeature(bytes, "x"), std::span<std::string_view>(&first, 1)).ok());

  // A packed list cut inside a two-byte varint is malformed, not a short read.
  tensorflow::Example cut;
  (*cut.mutable_features()->mutable_feature())["ids"].mutable_int64_list()->add_value(200);
  std::string b = cut.SerializeAsString();
  ASSERT_EQ(static_cast<unsigned char>(b[b.size() - 2]), 0xc8u);
  b[b.size() - 1] = '\x80';  // the varint's last byte now says more follows, past the list's end
  EXPECT_FALSE(ReadExampleNumbersAsFloats(*FindExampleFeature(b, "ids"), two).ok());
}

StatusOr<std::vector<Tensor>> Parse(const std::vector<std::string>& examples, const Tensor& fallback,
                                    DType dtype, Shape shape) {
  Tensor serialized = Tensor::FromVector<std::string>(Shape{static_cast<int64_t>(examples.size())}, examples);
  AttrMap attrs{{"key", std::string("x")}, {"dtype", dtype}, {"shape", shape}};
  return RunOp("ParseExampleFeature", std::vector<Tensor>{serialized, fallback}, attrs);
}

TEST(ParseExampleFeatureTest, FillsABatchTakingDefaultsForMissingFeatures) {
  tensorflow::Example no_list;
  (*no_list.mutable_features()->mutable_feature())["x"];
  const std::vector<std::string> examples = {MakeExample({{"x", {1, 2}}}).SerializeAsString(),
                                             MakeExample({{"y", {5}}}).SerializeAsString(),
                                             no_list.SerializeAsString()};
  StatusOr<std::vector<Tensor>> out =
      Parse(examples, Tensor::FromVector<float>(Shape{2}, {-1, -2}), DType::kFloat32, Shape{2});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)[0].shape(), (Shape{3, 2}));
  auto v = (*out)[0].data<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.end()), (std::vector<float>{1, 2, -1, -2, -1, -2}));
}

TEST(ParseExampleFeatureTest, ErrorsNameTheExampleAndFeature) {
  const Tensor required = Tensor(DType::kFloat32, Shape{0});
  const std::vector<std::string> missing = {MakeExample({{"x", {1}}}).SerializeAsString(),
                                            MakeExample({{"y", {1}}}).SerializeAsString()};
  Status s = Parse(missing, required, DType::kFloat32, Shape{1}).status();
  EXPECT_NE(s.message().find("example 1, feature 'x' (float32) is required"), std::string::npos) << s.ToString();

  const std::vector<std::string> too_many = {MakeExample({{"x", {1, 2}}}).SerializeAsString()};
  s = Parse(too_many, required, DType::kFloat32, Shape{1}).status();
  EXPECT_NE(s.message().find("2 values, expected 1"), std::string::npos) << s.ToString();

  s = Parse(too_many, Tensor(DType::kInt64, Shape{0}), DType::kInt64, Shape{2}).status();
  EXPECT_NE(s.message().find("float_list"), std::string::npos) << s.ToString();

  s = Parse({"\x0a\x7f"}, required, DType::kFloat32, Shape{1}).status();
  EXPECT_NE(s.message().find("example 0: malformed tf.Example"), std::string::npos) << s.ToString();

  // A default of the wrong size is refused whatever the examples hold.
  s = Parse(too_many, Tensor::FromVector<float>(Shape{3}, {0, 0, 0}), DType::kFloat32, Shape{2}).status();
  EXPECT_NE(s.message().find("needs 2"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace lockstep
