#include "training/event_writer.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "tensorflow/core/util/event.pb.h"

namespace lockstep::training {
namespace {

double WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

StatusOr<EventWriter> EventWriter::Create(const std::string& logdir) {
  std::error_code ec;
  std::filesystem::create_directories(logdir, ec);
  if (ec) return FailedPrecondition("cannot create logdir '" + logdir + "': " + ec.message());
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "localhost");
  const auto seconds = static_cast<int64_t>(WallTime());
  // The pid keeps two writers started in the same second apart.
  const std::string path =
      (std::filesystem::path(logdir) /
       ("events.out.tfevents." + std::to_string(seconds) + "." + host + "." + std::to_string(::getpid())))
          .string();
  StatusOr<TfRecordWriter> records = TfRecordWriter::Create(path);
  if (!records.ok()) return records.status();
  EventWriter writer(path, std::move(records).value());
  tensorflow::Event first;
  first.set_wall_time(WallTime());
  first.set_file_version("brain.Event:2");
  if (Status s = writer.records_.Write(first.SerializeAsString()); !s.ok()) return s;
  if (Status s = writer.Flush(); !s.ok()) return s;
  return writer;
}

Status EventWriter::AddScalar(std::string_view tag, int64_t step, double value) {
  tensorflow::Event event;
  event.set_wall_time(WallTime());
  event.set_step(step);
  tensorflow::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  v->set_simple_value(static_cast<float>(value));
  return records_.Write(event.SerializeAsString());
}

}  // namespace lockstep::training
