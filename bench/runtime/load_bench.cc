// Time from a bundle on disk (warm page cache) to a servable version, and where it goes:
// reading the weights into memory (page faults and the copy), hashing them, decoding, packing
// for the matmul core. Beside them, in the same run, the peers that bound it: SHA-256 of the
// same bytes already in memory, as one stream and file by file on as many threads as the
// reader uses (every byte must be hashed before it is served, so no load can beat the hash),
// and a plain read of the files into fresh memory.
//
//   build/bench/bench_load --out /tmp/load-bench [--bundle DIR ...] [--width N ...] [--repeats 5]
//
// --width N writes a bundle y = x W, W N x N float32 (large_matmul is 5792: 128 MiB;
// 16384 is 1 GiB), into --out, once. A bundle whose weights are shards is measured again with
// them as one file, written into --out. bench/runtime/run_load_bench.sh runs the usual set.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "model_store/loader.h"
#include "runtime/bundle/bundle.h"
#include "runtime/bundle/file_image.h"
#include "runtime/bundle/manifest.h"
#include "runtime/bundle/sha256.h"
#include "runtime/bundle/weights_file.h"
#include "runtime/graph_builder.h"
#include "runtime/model_dir.h"
#include "runtime/session.h"

namespace {

namespace fs = std::filesystem;
using lockstep::Status;

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

long MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

struct Sample {
  double seconds = 0;
  long faults = 0;
};

// Runs `f` `repeats` times and keeps the fastest run (the one least disturbed by neighbours).
// What f returns is freed after the clock stops: a server frees a version long after loading it.
template <typename F>
Sample Best(int repeats, F&& f) {
  Sample best{1e30, 0};
  for (int r = 0; r < repeats; ++r) {
    const long f0 = MinorFaults();
    const double t0 = Now();
    const auto kept = f();
    const double dt = Now() - t0;
    if (dt < best.seconds) best = {dt, MinorFaults() - f0};
  }
  return best;
}


void Die(const Status& s) {
  if (s.ok()) return;
  std::fprintf(stderr, "bench_load: %s\n", s.ToString().c_str());
  std::exit(1);
}

template <typename T>
T Check(lockstep::StatusOr<T> v) {
  Die(v.status());
  return std::move(v).value();
}

// y = x W with W width x width float32 of fixed pseudo-random values, as large_matmul is built.
fs::path WriteMatmulBundle(const fs::path& out, int64_t width) {
  const fs::path dir = out / ("matmul_" + std::to_string(width)) / "1";
  if (fs::exists(dir / lockstep::kBundleManifestFile)) return dir;
  lockstep::Tensor w(lockstep::DType::kFloat32, lockstep::Shape{width, width});
  uint32_t state = 12345;
  for (float& v : w.mutable_data<float>()) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) * 0x1.0p-24f - 0.5f;
  }
  lockstep::GraphBuilder g;
  const std::string x = g.Input("x", lockstep::DType::kFloat32, lockstep::Shape{-1, width});
  const std::string y = g.Op("MatMul", {x, g.Const("w", std::move(w))}, {}, "y");
  g.AddSignature({std::string(lockstep::kDefaultSignature), "tensorflow/serving/predict",
                  {{"x", x, lockstep::DType::kFloat32, lockstep::Shape{-1, width}}},
                  {{"y", y, lockstep::DType::kFloat32, lockstep::Shape{-1, width}}}});
  lockstep::BundleWriteOptions options;
  options.overwrite = true;
  Die(lockstep::WriteBundle(std::move(g).Build(), dir, options));
  return dir;
}

// The plain peer: the files read one after another into fresh anonymous memory, as a program
// with no checks would.
std::shared_ptr<void> PlainRead(const std::vector<fs::path>& paths, size_t size) {
  void* addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (addr == MAP_FAILED) Die(lockstep::Internal("cannot map " + std::to_string(size) + " bytes"));
  size_t at = 0;
  for (const fs::path& path : paths) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) Die(lockstep::Internal("cannot open " + path.string()));
    for (ssize_t n; (n = ::read(fd, static_cast<char*>(addr) + at, size - at)) != 0; at += static_cast<size_t>(n)) {
      if (n < 0) Die(lockstep::Internal("cannot read " + path.string()));
    }
    ::close(fd);
  }
  return std::shared_ptr<void>(addr, [size](void* p) { ::munmap(p, size); });
}

// The hashing peer: SHA-256 of `parts` of the bytes (already in memory), on `threads` threads
// taking the next part as they finish one, as the reader hashes the shards it reads.
std::vector<std::string> HashParts(std::span<const std::byte> bytes, const std::vector<size_t>& part_sizes,
                                   unsigned threads) {
  std::vector<std::string> digests(part_sizes.size());
  std::vector<size_t> begin{0};
  for (size_t n : part_sizes) begin.push_back(begin.back() + n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < part_sizes.size();) {
      digests[k] = lockstep::Sha256Hex(bytes.subspan(begin[k], part_sizes[k]));
    }
  };
  std::vector<std::jthread> helpers;
  for (unsigned i = 1; i < threads; ++i) helpers.emplace_back(work);
  work();
  return digests;
}

// The bundle at `dir` with its weights as one weights.bin, written under `out` once: how the
// same model loaded before shards (the reader reads and hashes a single file as it always did).
fs::path OneFileTwin(const fs::path& dir, const std::vector<fs::path>& weight_files, const fs::path& out) {
  const fs::path twin = out / (dir.parent_path().filename().string() + "-one-file") / dir.filename();
  if (fs::exists(twin / lockstep::kBundleManifestFile)) return twin;
  fs::create_directories(twin);
  {
    std::ofstream weights(twin / lockstep::kBundleWeightsFile, std::ios::binary);
    for (const fs::path& f : weight_files) weights << std::ifstream(f, std::ios::binary).rdbuf();
    if (!weights.flush()) Die(lockstep::Internal("cannot write " + (twin / lockstep::kBundleWeightsFile).string()));
  }
  fs::copy_file(dir / lockstep::kBundleGraphFile, twin / lockstep::kBundleGraphFile);
  std::vector<lockstep::ManifestEntry> manifest;
  for (std::string_view f : {lockstep::kBundleGraphFile, lockstep::kBundleWeightsFile}) {
    manifest.push_back({Check(lockstep::Sha256File(twin / f)), std::string(f)});
  }
  std::ofstream(twin / lockstep::kBundleManifestFile) << lockstep::FormatManifest(std::move(manifest));
  return twin;
}

void Row(const char* what, const Sample& s, double bytes) {
  std::printf("  %-38s %8.1f ms %8.2f GB/s %9ld faults\n", what, s.seconds * 1e3, bytes / s.seconds / 1e9, s.faults);
}

// Measures the bundle at `dir` and, where its weights are shards, the same bundle with them as
// one file (written under `out`).
void Measure(const fs::path& dir, int repeats, const fs::path& out) {
  const auto manifest_file = Check(lockstep::FileImage::Read(dir / lockstep::kBundleManifestFile));
  const std::string_view manifest_text(reinterpret_cast<const char*>(manifest_file->data()), manifest_file->size());
  const auto manifest = Check(lockstep::ParseManifest(manifest_text));
  std::vector<fs::path> files;
  std::vector<size_t> sizes;
  size_t weight_bytes = 0;
  for (const std::string& f : Check(lockstep::ListedWeightFiles(manifest))) {
    files.push_back(dir / f);
    sizes.push_back(fs::file_size(files.back()));
    weight_bytes += sizes.back();
  }
  const double bytes = static_cast<double>(weight_bytes + fs::file_size(dir / lockstep::kBundleGraphFile));
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned threads = std::min<unsigned>(cores, static_cast<unsigned>(files.size()));
  std::printf("%s: %.1f MiB of weights in %zu files; %u cores\n", dir.string().c_str(),
              static_cast<double>(weight_bytes) / (1 << 20), files.size(), cores);
  (void)PlainRead(files, weight_bytes);  // into the page cache

  const auto image = Check(lockstep::FileImage::ReadParts(files, UINT64_MAX, [](size_t, std::span<const std::byte>) {}));
  const Sample hash = Best(repeats, [&] { return lockstep::Sha256Hex(image->bytes()); });
  const Sample hash_parts = Best(repeats, [&] { return HashParts(image->bytes(), sizes, threads); });
  const Sample plain = Best(repeats, [&] { return PlainRead(files, weight_bytes); });
  const Sample read = Best(repeats, [&] { return Check(lockstep::ReadModelDir(dir)); });
  // Session::Create alone: the bundle is read before the clock starts.
  Sample create{1e30, 0};
  for (int r = 0; r < repeats; ++r) {
    lockstep::Model model = Check(lockstep::ReadModelDir(dir));
    const Sample one = Best(1, [&] { return Check(lockstep::Session::Create(std::move(model))); });
    if (one.seconds < create.seconds) create = one;
  }
  const Sample load = Best(repeats, [&] {
    return Check(lockstep::LoadVersion("bench", 1, dir, lockstep::SessionOptions{}));
  });

  Row("peer: SHA-256 in memory, one stream", hash, bytes);
  char label[64];
  std::snprintf(label, sizeof label, "peer: SHA-256 of the files, %u threads", threads);
  Row(label, hash_parts, bytes);
  Row("peer: plain read into fresh memory", plain, bytes);
  Row("read and verify (ReadBundle)", read, bytes);
  Row("compile and pack (Session::Create)", create, bytes);
  Row("to servable (LoadVersion)", load, bytes);
  std::printf("  load speed / one-stream SHA-256 speed: %.2f; / SHA-256 of the files on %u threads: %.2f\n\n",
              hash.seconds / load.seconds, threads, hash_parts.seconds / load.seconds);
  if (files.size() > 1) Measure(OneFileTwin(dir, files, out), repeats, out);
}

}  // namespace

int main(int argc, char** argv) {
  fs::path out = fs::temp_directory_path() / "lockstep-load-bench";
  std::vector<fs::path> dirs;
  std::vector<int64_t> widths;
  int repeats = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--out") out = argv[i + 1];
    else if (flag == "--bundle") dirs.emplace_back(argv[i + 1]);
    else if (flag == "--width") widths.push_back(std::stoll(argv[i + 1]));
    else if (flag == "--repeats") repeats = std::max(1, std::stoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "bench_load: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (dirs.empty() && widths.empty()) widths = {5792};
  for (int64_t w : widths) dirs.push_back(WriteMatmulBundle(out, w));
  std::printf("best of %d runs each; GB/s = bundle bytes / time\n\n", repeats);
  for (const fs::path& dir : dirs) Measure(dir, repeats, out);
  return 0;
}
