// SavedModel (fuzz_targets.h): a TensorFlow SavedModel directory from anywhere, as the model
// store reads it before serving it, and the serialized tf.Examples its graphs then parse.
#include <cstring>
#include <string>
#include <string_view>

#include "runtime/example_wire.h"
#include "runtime/saved_model/saved_model.h"
#include "runtime/session.h"
#include "tests/fuzz/fuzz_files.h"
#include "tests/fuzz/fuzz_targets.h"

namespace lockstep::fuzz {
namespace {

// Takes a little-endian uint32 length and that many bytes (or what is left) off `input`.
std::string_view TakePart(std::string_view& input) {
  if (input.size() < 4) {
    input = {};
    return {};
  }
  uint32_t n;
  std::memcpy(&n, input.data(), sizeof(n));  // little-endian hosts only
  input.remove_prefix(4);
  const std::string_view part = input.substr(0, n);
  input.remove_prefix(part.size());
  return part;
}

}  // namespace

void SavedModel(Bytes data) {
  std::string_view input(reinterpret_cast<const char*>(data.data()), data.size());
  const std::string_view pb = TakePart(input);
  const std::string_view index = TakePart(input);
  const std::string_view variables = input;

  const std::filesystem::path dir = FuzzScratchDir() / "saved_model";
  std::filesystem::create_directories(dir / "variables");
  if (!WriteBytes(dir / kSavedModelFile, pb) || !WriteBytes(dir / "variables/variables.index", index) ||
      !WriteBytes(dir / "variables/variables.data-00000-of-00001", variables)) {
    return;
  }
  StatusOr<Model> model = ReadSavedModel(dir);
  if (model.ok()) {
    // What the importer accepts, the model store goes on to compile; that must not fail badly.
    SessionOptions options;
    options.max_bytes_per_run = size_t{64} << 20;
    (void)Session::Create(std::move(model).value(), options);
  }

  // The same bytes as a serialized tf.Example, read for a feature of each kind.
  const std::string_view whole(reinterpret_cast<const char*>(data.data()), data.size());
  for (std::string_view key : {"x", "inputs", ""}) {
    StatusOr<ExampleFeature> feature = FindExampleFeature(whole, key);
    if (!feature.ok()) continue;
    float floats[4];
    int64_t ints[4];
    std::string strings[4];
    for (size_t n : {size_t{1}, size_t{4}}) {
      (void)ReadExampleFloats(*feature, std::span<float>(floats, n));
      (void)ReadExampleInt64s(*feature, std::span<int64_t>(ints, n));
      (void)ReadExampleBytes(*feature, std::span<std::string>(strings, n));
    }
  }
}

}  // namespace lockstep::fuzz
