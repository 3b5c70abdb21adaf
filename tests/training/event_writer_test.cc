#include "training/event_writer.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tensorflow/core/util/event.pb.h"

namespace lockstep::training {
namespace {

TEST(EventWriterTest, WritesTensorBoardScalars) {
  const std::filesystem::path logdir =
      std::filesystem::temp_directory_path() / ("lockstep_events_" + std::to_string(::getpid())) / "run1";
  std::filesystem::remove_all(logdir.parent_path());
  StatusOr<EventWriter> writer = EventWriter::Create(logdir.string());
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  ASSERT_TRUE(writer.value().AddScalar("loss", 10, 0.5).ok());
  ASSERT_TRUE(writer.value().AddScalar("accuracy", 10, 0.875).ok());
  ASSERT_TRUE(writer.value().AddScalar("loss", 20, 0.25).ok());
  ASSERT_TRUE(writer.value().Flush().ok());

  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(logdir)) files.push_back(entry.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].filename().string().rfind("events.out.tfevents.", 0), 0u) << files[0];
  EXPECT_EQ(files[0].string(), writer.value().path());

  StatusOr<TfRecordReader> reader = TfRecordReader::Open(files[0].string());
  ASSERT_TRUE(reader.ok());
  std::vector<tensorflow::Event> events;
  std::string record;
  while (true) {
    StatusOr<bool> more = reader.value().Next(&record);
    ASSERT_TRUE(more.ok()) << more.status().ToString();
    if (!more.value()) break;
    tensorflow::Event e;
    ASSERT_TRUE(e.ParseFromString(record));
    events.push_back(e);
  }
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_GT(events[0].wall_time(), 1.7e9);
  const std::tuple<const char*, int64_t, float> expected[] = {
      {"loss", 10, 0.5f}, {"accuracy", 10, 0.875f}, {"loss", 20, 0.25f}};
  for (size_t i = 0; i < 3; ++i) {
    const tensorflow::Event& e = events[i + 1];
    EXPECT_EQ(e.step(), std::get<1>(expected[i]));
    ASSERT_EQ(e.summary().value_size(), 1);
    EXPECT_EQ(e.summary().value(0).tag(), std::get<0>(expected[i]));
    EXPECT_EQ(e.summary().value(0).simple_value(), std::get<2>(expected[i]));
    EXPECT_GE(e.wall_time(), events[0].wall_time());
  }
  std::filesystem::remove_all(logdir.parent_path());
}

TEST(EventWriterTest, UnwritableLogdirIsAnError) {
  StatusOr<EventWriter> writer = EventWriter::Create("/proc/lockstep_no_such_dir/run");
  ASSERT_FALSE(writer.ok());
  EXPECT_NE(writer.status().message().find("/proc/lockstep_no_such_dir/run"), std::string::npos)
      << writer.status().message();
}

}  // namespace
}  // namespace lockstep::training
