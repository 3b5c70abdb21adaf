// BundleReader (fuzz_targets.h): a bundle on disk from anywhere, as the model store reads it
// before serving it.
#include <cstring>
#include <string>
#include <string_view>

#include "runtime/bundle/bundle.h"
#include "runtime/bundle/manifest.h"
#include "runtime/bundle/sha256.h"
#include "runtime/session.h"
#include "tests/fuzz/fuzz_files.h"
#include "tests/fuzz/fuzz_targets.h"

namespace lockstep::fuzz {

void BundleReader(Bytes data) {
  const std::string_view input(reinterpret_cast<const char*>(data.data()), data.size());
  (void)ParseManifest(input);
  if (input.size() < 4) return;

  uint32_t graph_bytes;
  std::memcpy(&graph_bytes, input.data(), sizeof(graph_bytes));  // little-endian hosts only
  const std::string_view rest = input.substr(4);
  const std::string_view graph = rest.substr(0, graph_bytes);
  const std::string_view weights = rest.substr(graph.size());

  const std::filesystem::path dir = FuzzScratchDir() / "bundle";
  std::filesystem::create_directories(dir);
  const std::string manifest = FormatManifest({{Sha256Hex(graph), std::string(kBundleGraphFile)},
                                               {Sha256Hex(weights), std::string(kBundleWeightsFile)}});
  if (!WriteBytes(dir / kBundleGraphFile, graph) || !WriteBytes(dir / kBundleWeightsFile, weights) ||
      !WriteBytes(dir / kBundleManifestFile, manifest)) {
    return;
  }

  StatusOr<Model> model = ReadBundle(dir);
  if (!model.ok()) return;
  // What the reader accepts, the model store goes on to compile; that must not fail badly.
  SessionOptions options;
  options.max_bytes_per_run = size_t{64} << 20;
  (void)Session::Create(std::move(model).value(), options);
}

}  // namespace lockstep::fuzz
