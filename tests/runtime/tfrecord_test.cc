#include "runtime/tfrecord.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/common/scratch_dir.h"

namespace lockstep {
namespace {

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
  test::ScratchDir dir;
  const std::string path = (dir / "r.tfrecord").string();
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
  test::ScratchDir dir;
  const std::string path = (dir / "bad.tfrecord").string();
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
  test::ScratchDir dir;
  const std::string path = (dir / "bad.tfrecord").string();
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

}  // namespace
}  // namespace lockstep
