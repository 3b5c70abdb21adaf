// The streaming input's speed, stage by stage, on real files: how many records a second (and
// MB of records a second) model-train's reader frames and checks, decodes into rows, and turns
// into shuffled batches; beside protobuf's own parser (each record parsed into a reused
// tensorflow::Example and its values copied out) on the same records, the C++ peer. The
// python3-protobuf peer is input_python_peer.py; run_input_bench.sh runs both.
//
//   bench_input --format tfrecord --features pixels [--label label] [--passes P] FILE...
//
// Each stage reads every file P times (default 3) and reports its best pass, one JSON line a
// stage.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tensorflow/core/example/example.pb.h"
#include "training/data/data_scan.h"
#include "training/data/record_stream.h"
#include "training/data/row_decoder.h"
#include "training/data/streaming_pipeline.h"

namespace {

using namespace lockstep;
using namespace lockstep::training;

struct Pass {
  int64_t records = 0, bytes = 0;
};

// The best of `passes` runs of `run`, as records/s and MB/s.
void Report(const char* stage, int passes, const std::function<StatusOr<Pass>()>& run) {
  double best = 0;
  Pass counted;
  for (int p = 0; p < passes; ++p) {
    const auto start = std::chrono::steady_clock::now();
    StatusOr<Pass> pass = run();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!pass.ok()) {
      std::fprintf(stderr, "bench_input: %s: %s\n", stage, pass.status().ToString().c_str());
      std::exit(1);
    }
    counted = *pass;
    best = std::max(best, 1.0 / s);
  }
  std::printf("{\"stage\": \"%s\", \"records\": %lld, \"records_per_s\": %.0f, \"mb_per_s\": %.1f}\n", stage,
              static_cast<long long>(counted.records), static_cast<double>(counted.records) * best,
              static_cast<double>(counted.bytes) * best / 1e6);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  DataConfig data;
  data.format = "tfrecord";
  data.test_fraction = 0;
  int passes = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (arg == "--format") {
      data.format = value();
    } else if (arg == "--features") {
      data.features = {value()};
    } else if (arg == "--label") {
      data.label = value();
    } else if (arg == "--passes") {
      passes = std::stoi(value());
    } else {
      data.train.push_back(arg);
    }
  }
  if (data.train.empty()) {
    std::fprintf(stderr, "usage: bench_input [--format F] [--features KEY] [--passes P] FILE...\n");
    return 2;
  }
  StatusOr<DataScan> scanned = ScanTrainingFiles(data, data.train);
  if (!scanned.ok()) {
    std::fprintf(stderr, "bench_input: %s\n", scanned.status().ToString().c_str());
    return 1;
  }
  const DataScan& scan = *scanned;
  const auto width = static_cast<size_t>(scan.format.num_features());

  Report("frame_and_crc", passes, [&]() -> StatusOr<Pass> {
    Pass pass;
    std::string_view record;
    for (const std::string& file : scan.files) {
      LS_ASSIGN_OR_RETURN(RecordStream stream, RecordStream::Open(file, data.format, RecordOptions(data)));
      while (true) {
        LS_ASSIGN_OR_RETURN(bool more, stream.Next(&record));
        if (!more) break;
        ++pass.records;
        pass.bytes += static_cast<int64_t>(record.size());
      }
    }
    return pass;
  });

  std::vector<float> row(width);
  Report("decode_rows", passes, [&]() -> StatusOr<Pass> {
    Pass pass;
    std::string_view record;
    for (const std::string& file : scan.files) {
      LS_ASSIGN_OR_RETURN(RecordStream stream, RecordStream::Open(file, data.format, RecordOptions(data)));
      RowDecoder decoder(scan.format);
      std::vector<float> targets(static_cast<size_t>(scan.format.num_targets()));
      LS_RETURN_IF_ERROR(decoder.StartFile(stream));
      while (true) {
        LS_ASSIGN_OR_RETURN(bool more, stream.Next(&record));
        if (!more) break;
        RawLabel label;
        LS_RETURN_IF_ERROR(decoder.Decode(record, stream, row, label, targets));
        ++pass.records;
        pass.bytes += static_cast<int64_t>(record.size());
      }
    }
    return pass;
  });

  if (data.format == "tfrecord") {
    Report("protobuf_peer", passes, [&]() -> StatusOr<Pass> {
      Pass pass;
      std::string_view record;
      tensorflow::Example example;
      for (const std::string& file : scan.files) {
        LS_ASSIGN_OR_RETURN(RecordStream stream, RecordStream::Open(file, data.format, RecordOptions(data)));
        while (true) {
          LS_ASSIGN_OR_RETURN(bool more, stream.Next(&record));
          if (!more) break;
          if (!example.ParseFromArray(record.data(), static_cast<int>(record.size()))) return DataLoss("parse");
          float* out = row.data();
          for (const std::string& key : data.features) {
            const tensorflow::Feature& f = example.features().feature().at(key);
            if (f.has_float_list()) {
              out = std::copy(f.float_list().value().begin(), f.float_list().value().end(), out);
            } else {
              for (int64_t v : f.int64_list().value()) *out++ = static_cast<float>(v);
            }
          }
          volatile int64_t label = example.features().feature().at(data.label).int64_list().value(0);
          (void)label;
          ++pass.records;
          pass.bytes += static_cast<int64_t>(record.size());
        }
      }
      return pass;
    });
  }

  Report("shuffled_batches", passes, [&]() -> StatusOr<Pass> {
    LS_ASSIGN_OR_RETURN(std::unique_ptr<StreamingPipeline> pipeline,
                        StreamingPipeline::Create(scan, {.batch_size = 128,
                                                         .shuffle_buffer = 10000,
                                                         .seed = 1,
                                                         .interleave = 4,
                                                         .prefetch = 2,
                                                         .records = RecordOptions(data)}));
    Pass pass;
    while (const Batch* b = pipeline->Next()) pass.records += b->rows;
    LS_RETURN_IF_ERROR(pipeline->status());
    pass.bytes = scan.bytes;
    return pass;
  });
  return 0;
}
