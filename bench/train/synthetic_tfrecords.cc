// Writes a synthetic TFRecord data set of a given size, for the streaming input's memory and
// speed at scale (run_streaming_bench.sh): shards of tf.train.Examples with "pixels" (784
// floats: a class's template plus noise, so that there is something to learn) and "label"
// (0-9). Generated in the benchmark, never kept in the repository.
//
//   bench_synthetic_tfrecords DIR GIGABYTES [SHARDS]
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "runtime/tfrecord.h"
#include "tensorflow/core/example/example.pb.h"

int main(int argc, char** argv) {
  using namespace lockstep;
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_synthetic_tfrecords DIR GIGABYTES [SHARDS]\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const double gigabytes = std::atof(argv[2]);
  const int shards = argc > 3 ? std::atoi(argv[3]) : 16;
  std::filesystem::create_directories(dir);
  constexpr int kWidth = 784, kClasses = 10;
  std::mt19937 rng(1);
  std::normal_distribution<float> noise(0.0f, 0.5f);
  std::vector<std::vector<float>> templates(kClasses, std::vector<float>(kWidth));
  for (auto& t : templates)
    for (float& v : t) v = noise(rng) * 2;
  tensorflow::Example example;
  auto& features = *example.mutable_features()->mutable_feature();
  auto* pixels = features["pixels"].mutable_float_list();
  auto* label = features["label"].mutable_int64_list();
  const std::string probe = [&] {
    pixels->mutable_value()->Resize(kWidth, 0.0f);
    label->add_value(0);
    return FrameTfRecord(example.SerializeAsString());
  }();
  const auto records = static_cast<int64_t>(gigabytes * 1e9 / static_cast<double>(probe.size()));
  for (int s = 0; s < shards; ++s) {
    const std::string path = (dir / ("train-" + std::to_string(s) + ".tfrecord")).string();
    StatusOr<TfRecordWriter> writer = TfRecordWriter::Create(path);
    if (!writer.ok()) {
      std::fprintf(stderr, "%s\n", writer.status().ToString().c_str());
      return 1;
    }
    for (int64_t i = records * s / shards; i < records * (s + 1) / shards; ++i) {
      const int c = static_cast<int>(rng() % kClasses);
      for (int j = 0; j < kWidth; ++j) pixels->set_value(j, templates[static_cast<size_t>(c)][static_cast<size_t>(j)] + noise(rng));
      label->set_value(0, c);
      if (Status st = writer->Write(example.SerializeAsString()); !st.ok()) {
        std::fprintf(stderr, "%s\n", st.ToString().c_str());
        return 1;
      }
    }
  }
  std::printf("{\"records\": %lld, \"bytes\": %lld, \"shards\": %d}\n", static_cast<long long>(records),
              static_cast<long long>(records * static_cast<int64_t>(probe.size())), shards);
  return 0;
}
