// tf.train.Example records read into a table (example_reader.h), from TFRecord files.
#include <gtest/gtest.h>

#include <filesystem>

#include "runtime/tfrecord.h"
#include "tensorflow/core/example/example.pb.h"
#include "tests/common/scratch_dir.h"
#include "training/data/example_reader.h"

namespace lockstep::training {
namespace {

std::string MakeExample(const std::vector<float>& pixels, int64_t age, const std::string* name, int64_t id) {
  tensorflow::Example e;
  auto& f = *e.mutable_features()->mutable_feature();
  for (float p : pixels) f["pixels"].mutable_float_list()->add_value(p);
  f["age"].mutable_int64_list()->add_value(age);
  if (name != nullptr) {
    f["label"].mutable_bytes_list()->add_value(*name);
  } else {
    f["label"].mutable_int64_list()->add_value(id);
  }
  return e.SerializeAsString();
}

Status WriteRecords(const std::string& path, const std::vector<std::string>& records) {
  StatusOr<TfRecordWriter> writer = TfRecordWriter::Create(path);
  if (!writer.ok()) return writer.status();
  for (const std::string& r : records) {
    if (Status s = writer.value().Write(r); !s.ok()) return s;
  }
  return writer.value().Flush();
}

TEST(ExampleReaderTest, ReadsFeaturesInKeyOrderAcrossFiles) {
  test::ScratchDir dir;
  const std::string a = (dir / "a.tfrecord").string(), b = (dir / "b.tfrecord").string();
  ASSERT_TRUE(WriteRecords(a, {MakeExample({1, 2, 3}, 40, nullptr, 2)}).ok());
  ASSERT_TRUE(
      WriteRecords(b, {MakeExample({4, 5, 6}, 50, nullptr, 0), MakeExample({7, 8, 9}, 60, nullptr, 1)}).ok());
  ExampleOptions options;
  options.feature_keys = {"age", "pixels"};
  const std::vector<std::string> paths = {a, b};
  StatusOr<LabelledTable> table = ReadExamples(paths, options);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_EQ(table.value().feature_names,
            (std::vector<std::string>{"age", "pixels[0]", "pixels[1]", "pixels[2]"}));
  EXPECT_EQ(table.value().feature_keys, (std::vector<FeatureKey>{{"age", 1}, {"pixels", 3}}));
  EXPECT_EQ(table.value().features, (std::vector<float>{40, 1, 2, 3, 50, 4, 5, 6, 60, 7, 8, 9}));
  EXPECT_EQ(table.value().labels, (std::vector<int32_t>{2, 0, 1}));
}

TEST(ExampleReaderTest, ClassNamesGetSortedIds) {
  test::ScratchDir dir;
  const std::string path = (dir / "n.tfrecord").string();
  const std::string cat = "cat", ant = "ant";
  ASSERT_TRUE(WriteRecords(path, {MakeExample({1}, 1, &cat, 0), MakeExample({2}, 2, &ant, 0)}).ok());
  ExampleOptions options;
  options.feature_keys = {"pixels"};
  const std::vector<std::string> paths = {path};
  StatusOr<LabelledTable> table = ReadExamples(paths, options);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_EQ(table.value().class_names, (std::vector<std::string>{"ant", "cat"}));
  EXPECT_EQ(table.value().labels, (std::vector<int32_t>{1, 0}));
}

TEST(ExampleReaderTest, ErrorsNameFileOffsetAndKey) {
  test::ScratchDir dir;
  const std::string path = (dir / "e.tfrecord").string();
  const std::vector<std::string> paths = {path};
  ExampleOptions options;
  options.feature_keys = {"pixels"};
  auto error_of = [&](const std::vector<std::string>& records) {
    EXPECT_TRUE(WriteRecords(path, records).ok());
    StatusOr<LabelledTable> table = ReadExamples(paths, options);
    EXPECT_FALSE(table.ok());
    return table.ok() ? std::string() : table.status().message();
  };
  const std::string first = MakeExample({1, 2}, 1, nullptr, 0);
  const std::string second_at = path + ": record at offset " + std::to_string(16 + first.size());
  EXPECT_EQ(error_of({first, MakeExample({1}, 1, nullptr, 0)}),
            second_at + ": feature 'pixels' has 1 values, the first example had 2");
  EXPECT_EQ(error_of({first, "not a proto \xff\xff"}),
            second_at + ": not a tf.train.Example (malformed tf.Example: Example: truncated or unknown field)");
  EXPECT_EQ(error_of({MakeExample({1, 2}, 1, nullptr, -3)}),
            path + ": record at offset 0: label -3 is out of range (class ids are 0 to 2147483647)");
  const std::string dog = "dog";
  EXPECT_EQ(error_of({first, MakeExample({1, 2}, 1, &dog, 0)}),
            second_at + ": label 'label' is a name, earlier records had ids");
  options.feature_keys = {"height"};
  EXPECT_EQ(error_of({first}), path + ": record at offset 0: no feature 'height'");
  options.feature_keys = {"pixels"};
  options.label_key = "class";
  EXPECT_EQ(error_of({first}), path + ": record at offset 0: no label feature 'class'");
}

}  // namespace
}  // namespace lockstep::training
