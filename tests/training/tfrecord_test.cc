#include "training/data/tfrecord.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tensorflow/core/example/example.pb.h"
#include "training/data/example_reader.h"

namespace lockstep::training {
namespace {

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("lockstep_tfrecord_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<std::string> ReadAll(const std::string& path, TfRecordReader::Options options, Status* error,
                                 int64_t* skipped = nullptr) {
  std::vector<std::string> records;
  StatusOr<TfRecordReader> reader = TfRecordReader::Open(path, options);
  if (!reader.ok()) {
    *error = reader.status();
    return records;
  }
  std::string record;
  while (true) {
    StatusOr<bool> more = reader.value().Next(&record);
    if (!more.ok()) {
      *error = more.status();
      break;
    }
    if (!more.value()) break;
    records.push_back(record);
  }
  if (skipped != nullptr) *skipped = reader.value().corrupt_skipped();
  return records;
}

// The framing, byte for byte: length, masked CRC of the length, data, masked CRC of the data.
// Expected bytes computed independently (a bitwise CRC-32C in Python).
TEST(TfRecordTest, FramingMatchesTensorFlows) {
  const std::string framed = FrameTfRecord("hello");
  const unsigned char expected[] = {0x05, 0,   0,   0,   0,   0,   0,    0,    0xea, 0xb2, 0x04,
                                    0x3e, 'h', 'e', 'l', 'l', 'o', 0xbb, 0x1f, 0x1c, 0x19};
  ASSERT_EQ(framed.size(), sizeof expected);
  for (size_t i = 0; i < sizeof expected; ++i)
    EXPECT_EQ(static_cast<unsigned char>(framed[i]), expected[i]) << i;
}

TEST(TfRecordTest, WritesAndReadsBack) {
  TempDir dir;
  const std::string path = dir.File("r.tfrecord");
  {
    StatusOr<TfRecordWriter> writer = TfRecordWriter::Create(path);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    for (const char* r : {"first", "", "third record"}) ASSERT_TRUE(writer.value().Write(r).ok());
    ASSERT_TRUE(writer.value().Flush().ok());
  }
  Status error;
  EXPECT_EQ(ReadAll(path, {}, &error), (std::vector<std::string>{"first", "", "third record"}));
  EXPECT_TRUE(error.ok()) << error.ToString();
}

TEST(TfRecordTest, CorruptDataIsReportedWithOffsetOrSkipped) {
  TempDir dir;
  const std::string path = dir.File("bad.tfrecord");
  std::string bytes = FrameTfRecord("aaaa") + FrameTfRecord("bbbb") + FrameTfRecord("cccc");
  bytes[20 + 12 + 1] ^= 0x40;  // inside the second record's data (records are 20 bytes)
  WriteBytes(path, bytes);

  Status error;
  EXPECT_EQ(ReadAll(path, {}, &error), (std::vector<std::string>{"aaaa"}));
  EXPECT_EQ(error.code(), StatusCode::kDataLoss);
  EXPECT_EQ(error.message(), path + ": record at offset 20: the data's CRC does not match");

  int64_t skipped = 0;
  error = Status::Ok();
  EXPECT_EQ(ReadAll(path, {.skip_corrupt = true}, &error, &skipped),
            (std::vector<std::string>{"aaaa", "cccc"}));
  EXPECT_TRUE(error.ok());
  EXPECT_EQ(skipped, 1);
}

TEST(TfRecordTest, DamagedLengthOrTruncationEndsTheFile) {
  TempDir dir;
  const std::string path = dir.File("bad.tfrecord");
  std::string bytes = FrameTfRecord("aaaa") + FrameTfRecord("bbbb");
  bytes[20] ^= 0x01;  // the second record's length
  WriteBytes(path, bytes);
  Status error;
  EXPECT_EQ(ReadAll(path, {}, &error), (std::vector<std::string>{"aaaa"}));
  EXPECT_EQ(error.message(),
            path + ": record at offset 20: the length's CRC does not match (a damaged header)");
  int64_t skipped = 0;
  error = Status::Ok();
  EXPECT_EQ(ReadAll(path, {.skip_corrupt = true}, &error, &skipped), (std::vector<std::string>{"aaaa"}));
  EXPECT_TRUE(error.ok());
  EXPECT_EQ(skipped, 1);

  WriteBytes(path, (FrameTfRecord("aaaa") + FrameTfRecord("bbbb")).substr(0, 35));
  error = Status::Ok();
  EXPECT_EQ(ReadAll(path, {}, &error), (std::vector<std::string>{"aaaa"}));
  EXPECT_EQ(error.message(),
            path + ": record at offset 20: the file ends inside the record (4 bytes announced)");
  WriteBytes(path, FrameTfRecord("aaaa") + "\x01\x02");
  error = Status::Ok();
  EXPECT_EQ(ReadAll(path, {}, &error), (std::vector<std::string>{"aaaa"}));
  EXPECT_EQ(error.message(), path + ": record at offset 20: the file ends inside a record header");
}

TEST(TfRecordTest, MissingFileIsNamed) {
  StatusOr<TfRecordReader> reader = TfRecordReader::Open("/nonexistent/x.tfrecord");
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kNotFound);
  EXPECT_NE(reader.status().message().find("'/nonexistent/x.tfrecord'"), std::string::npos);
}

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
  TempDir dir;
  const std::string a = dir.File("a.tfrecord"), b = dir.File("b.tfrecord");
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
  TempDir dir;
  const std::string path = dir.File("n.tfrecord");
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
  TempDir dir;
  const std::string path = dir.File("e.tfrecord");
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
