// model-cli: inspect, verify and run Lockstep bundles, TensorFlow SavedModels and ONNX models;
// import a SavedModel or an ONNX model as a bundle; write example bundles.
//
//   model-cli show --dir D [--all]
//   model-cli run --dir D [--signature NAME] --input 'x=[[1,2],[3,4]]' [--input ...]
//   model-cli verify --dir D
//   model-cli import --saved_model D --out B [--overwrite]
//   model-cli import --onnx F --out B [--overwrite]
//   model-cli export-onnx --dir D --out F [--signature NAME] [--overwrite]
//   model-cli make-example half_plus_two --out D [--overwrite]
//   model-cli publish --dir D --to BASE_PATH [--version N]
//   model-cli warmup --from-log 'logs/*.tfrecord' --out V/assets.extra/tf_serving_warmup_requests [--max 100]
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/cfg/env.h>
#include <spdlog/spdlog.h>
#include <sstream>
#include <string>
#include <vector>

#include "model_store/s3/s3_settings.h"
#include "model_store/version_storage.h"
#include "runtime/cli/flags.h"
#include "runtime/bundle/bundle.h"
#include "runtime/model_dir.h"
#include "runtime/onnx/onnx_export.h"
#include "runtime/onnx/onnx_model.h"
#include "runtime/saved_model/saved_model.h"
#include "runtime/cli/examples.h"
#include "runtime/cli/warmup_from_log.h"
#include "runtime/session.h"
#include "runtime/tensor_json.h"

namespace lockstep {
namespace {

constexpr const char* kUsage = R"(usage: model-cli <command> [flags]

DIR is a version directory: a Lockstep bundle, a TensorFlow SavedModel (saved_model.pb and
variables/) or an ONNX model (model.onnx), which are translated on the way in.

commands:
  show --dir DIR [--all]
      Print the bundle's signatures (input and output names, dtypes, shapes) and metadata.
      --all also lists the graph's nodes and weights.
  run --dir DIR [--signature NAME] [--threads N] --input KEY=VALUE [--input KEY=VALUE ...]
      Run a signature (default serving_default) and print its outputs as a JSON object.
      VALUE is JSON (nested lists, e.g. 'x=[[1,2],[3,4]]') or @FILE holding JSON.
      --threads sizes the intra-op thread pool (default: one per core).
  verify --dir DIR
      Validate the bundle (checksums, format, weights, graph, signatures) and compile it.
      Exits 0 if it is servable, 1 with the reason otherwise. A SavedModel's checkpoint is
      checked (every CRC) and its graph translated; an ONNX model is checked by ONNX's
      checker and shape inference, and translated.
  import --saved_model DIR --out DIR [--overwrite]
  import --onnx FILE --out DIR [--overwrite]
      Translate a TensorFlow SavedModel or an ONNX model file (external data beside it) and
      write it as a Lockstep bundle (checksummed; a SavedModel's assets copied), after
      compiling it as the server would.
  export-onnx --dir DIR --out FILE [--signature NAME] [--overwrite]
      Write a signature (default serving_default) of a model as a standard ONNX model
      (opset 17; inputs and outputs under the signature's keys; NHWC convolutions and pools
      wrapped in Transposes; bf16 products rounded through BFLOAT16 Casts), checked by ONNX's
      checker. An op with no ONNX translation is an error naming it. An existing FILE is
      replaced only with --overwrite.
  make-example NAME --out DIR [--overwrite]
      Write an example bundle. NAME: half_plus_two (y = 0.5 * x + 2). An existing DIR is
      replaced only with --overwrite.
  publish --dir DIR --to BASE_PATH [--version N]
      Verify DIR (as verify does) and write it into a model's base path as version N
      (default: the highest there + 1), the way model-server expects to find a version
      whole: BASE_PATH a local directory (copied beside, renamed into place) or
      s3://bucket/prefix/model (every object first, the one that completes the version last:
      MANIFEST.sha256, saved_model.pb or model.onnx; credentials and endpoint from AWS_* and
      S3_* as model-server reads them). A version already there is never replaced.
  warmup --from-log PATTERN [--from-log PATTERN ...] --out FILE [--max N] [--model NAME]
         [--seed S] [--overwrite]
      Cut a warm-up file (VERSION/assets.extra/tf_serving_warmup_requests) from request logs
      model-server wrote (logging_config: TFRecord files of PredictionLog; PATTERN is a file
      or a glob such as 'logs/*.tfrecord'). At most N records (default 100, at most 1000),
      drawn uniformly over the logs' replayable records (not truncated, with a request; of
      model NAME only, with --model), copied as they are, in the logs' order. The same logs
      and seed (default 0) give the same file. Written into a bundle's assets.extra/, it is
      listed in the bundle's MANIFEST.sha256 (do it before the version is published).

exit status: 0 success, 1 failure, 2 bad usage
)";

int Fail(const std::string& message) {
  std::cerr << "model-cli: error: " << message << "\n";
  return 1;
}

int Usage(const std::string& message) {
  std::cerr << "model-cli: " << message << "\n\n" << kUsage;
  return 2;
}

// Names and metadata come from the bundle: print control bytes escaped so a hostile bundle
// cannot drive the terminal.
std::string Printable(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string SpecString(DType dtype, const Shape& shape) {
  return std::string(DTypeName(dtype)) + " " + shape.ToString();
}

int Show(const Flags& flags) {
  if (!flags.Has("dir")) return Usage("show needs --dir");
  auto model = ReadModelDir(flags.Get("dir"));
  if (!model.ok()) return Fail(model.status().message());
  const Graph& g = model->graph;
  std::ostringstream out;
  out << "bundle: " << flags.Get("dir") << "\n";
  out << "metadata:\n";
  for (const auto& [k, v] : g.metadata) {
    if (k == kSignatureDefsMetadataKey) continue;  // shown below, decoded
    out << "  " << Printable(k) << ": " << Printable(v) << "\n";
  }
  if (StatusOr<tensorflow::MetaGraphDef> defs = ImportedSignatureDefs(g); defs.ok()) {
    out << "  " << kSignatureDefsMetadataKey << ":";
    const std::map<std::string, tensorflow::SignatureDef> sorted(defs->signature_def().begin(),
                                                                 defs->signature_def().end());
    for (const auto& [name, def] : sorted) out << " " << Printable(name);
    out << "\n";
  }
  auto binding = [&](const TensorBinding& b) {
    out << "    " << Printable(b.key) << ": " << SpecString(b.dtype, b.shape) << (b.any_shape ? " (any shape)" : "")
        << "  <- " << Printable(b.tensor) << "\n";
  };
  for (const Signature& sig : g.signatures) {
    out << "signature '" << Printable(sig.name) << "'";
    if (!sig.method_name.empty()) out << " (" << Printable(sig.method_name) << ")";
    out << ":\n  inputs:\n";
    for (const auto& b : sig.inputs) binding(b);
    out << "  outputs:\n";
    for (const auto& b : sig.outputs) binding(b);
  }
  if (flags.Has("all")) {
    out << "nodes (" << g.nodes.size() << "):\n";
    for (const NodeDef& n : g.nodes) {
      out << "  " << Printable(n.name) << " = " << Printable(n.op) << "(";
      for (size_t i = 0; i < n.inputs.size(); ++i) out << (i ? ", " : "") << Printable(n.inputs[i]);
      out << ")\n";
    }
    size_t bytes = 0;
    for (const auto& [name, t] : model->weights) bytes += t.byte_size();
    out << "weights (" << model->weights.size() << ", " << bytes << " bytes):\n";
    for (const auto& [name, t] : model->weights) out << "  " << Printable(name) << ": " << SpecString(t.dtype(), t.shape()) << "\n";
  }
  std::cout << out.str();
  return 0;
}

StatusOr<std::string> ReadInputText(const std::string& value) {
  if (value.empty() || value[0] != '@') return value;
  std::ifstream in(value.substr(1), std::ios::binary);
  if (!in) return NotFound("cannot read input file '" + value.substr(1) + "'");
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

int Run(const Flags& flags) {
  if (!flags.Has("dir")) return Usage("run needs --dir");
  const std::string signature_name = flags.Get("signature", std::string(kDefaultSignature));
  if (flags.Has("threads")) {
    const std::string text = flags.Get("threads");
    int threads = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), threads);
    if (ec != std::errc() || ptr != text.data() + text.size() || threads < 1 || threads > 1024) {
      return Usage("--threads takes a whole number from 1 to 1024, got '" + text + "'");
    }
    ThreadPool::SetDefaultThreads(threads);
  }
  auto model = ReadModelDir(flags.Get("dir"));
  if (!model.ok()) return Fail(model.status().message());
  auto session = Session::Create(std::move(*model));
  if (!session.ok()) return Fail(session.status().message());
  const Signature* sig = (*session)->FindSignature(signature_name);
  if (sig == nullptr) {
    std::string known;
    for (const auto& s : (*session)->signatures()) known += (known.empty() ? "" : ", ") + s.name;
    return Fail("no signature named '" + signature_name + "' (the bundle has: " + known + ")");
  }

  std::vector<NamedTensor> inputs;
  for (const std::string& spec : flags.GetAll("input")) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) return Usage("--input takes KEY=VALUE, got '" + spec + "'");
    std::string key = spec.substr(0, eq);
    const TensorBinding* binding = nullptr;
    for (const auto& b : sig->inputs) {
      if (b.key == key) binding = &b;
    }
    if (binding == nullptr) return Fail("signature '" + sig->name + "' has no input '" + key + "'");
    auto text = ReadInputText(spec.substr(eq + 1));
    if (!text.ok()) return Fail(text.status().message());
    auto value = ParseJson(*text);
    if (!value.ok()) return Fail("input '" + key + "': " + value.status().message());
    auto tensor = TensorFromJson(*value, binding->dtype);
    if (!tensor.ok()) return Fail("input '" + key + "': " + tensor.status().message());
    inputs.push_back({key, std::move(*tensor)});
  }

  std::vector<NamedTensor> outputs;
  Status status = (*session)->Run(signature_name, inputs, &outputs);
  if (!status.ok()) return Fail(status.message());
  std::string out = "{";
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (i) out += ", ";
    out += nlohmann::json(outputs[i].name).dump() + ": ";
    AppendTensorJson(outputs[i].tensor, &out);
  }
  out += "}\n";
  std::cout << out;
  return 0;
}

// What verify prints of a servable `dir`, or why it is not.
StatusOr<std::string> VerifyDir(const std::string& dir) {
  LS_ASSIGN_OR_RETURN(Model model, ReadModelDir(dir));
  const size_t nodes = model.graph.nodes.size(), weights = model.weights.size();
  const bool per_input = model.per_input != nullptr;
  LS_ASSIGN_OR_RETURN(auto session, Session::Create(std::move(model)));
  std::string names;
  for (const auto& s : session->signatures()) names += (names.empty() ? "" : ", ") + s.name;
  const std::string size = per_input ? "every op translated; its graph is made per input shape when it runs"
                                     : std::to_string(nodes) + " nodes, " + std::to_string(weights) + " weights";
  return dir + " is a valid " + std::string(ModelFormatName(DetectModelFormat(dir))) + " (" + size +
         "; signatures: " + names + ")";
}

int Verify(const Flags& flags) {
  if (!flags.Has("dir")) return Usage("verify needs --dir");
  StatusOr<std::string> verified = VerifyDir(flags.Get("dir"));
  if (!verified.ok()) return Fail(verified.status().message());
  std::cout << "OK: " << *verified << "\n";
  return 0;
}

int Publish(const Flags& flags) {
  if (!flags.Has("dir")) return Usage("publish needs --dir");
  if (!flags.Has("to")) return Usage("publish needs --to");
  int64_t version = 0;
  if (flags.Has("version")) {
    const std::string text = flags.Get("version");
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), version);
    if (ec != std::errc() || end != text.data() + text.size() || version < 1) {
      return Usage("--version must be a whole number >= 1, not '" + text + "'");
    }
  }
  StatusOr<std::string> verified = VerifyDir(flags.Get("dir"));
  if (!verified.ok()) return Fail(verified.status().message());
  StorageOptions storage;
  const std::string to = flags.Get("to");
  if (IsS3Url(to)) {
    StatusOr<S3Settings> s3 = S3SettingsFromEnvironment();
    if (!s3.ok()) return Fail(s3.status().message());
    storage.s3 = *s3;
  }
  StatusOr<int64_t> published = PublishVersion(flags.Get("dir"), to, version, storage);
  if (!published.ok()) return Fail("publishing to " + to + ": " + published.status().message());
  std::string where = to;
  while (where.size() > 1 && where.back() == '/') where.pop_back();
  std::cout << "published " << flags.Get("dir") << " as " << where << "/" << *published << "\n";
  return 0;
}

// The files under `dir`/assets, by path relative to it.
StatusOr<std::map<std::string, std::string>> ReadAssets(const std::filesystem::path& dir) {
  std::map<std::string, std::string> assets;
  const std::filesystem::path root = dir / "assets";
  std::error_code ec;
  if (!std::filesystem::is_directory(root, ec)) return assets;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    std::ifstream in(it->path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    if (!in) return InvalidArgument(it->path().string() + ": cannot be read");
    assets[std::filesystem::relative(it->path(), root).string()] = bytes.str();
  }
  if (ec) return InvalidArgument(root.string() + ": " + ec.message());
  return assets;
}

int Import(const Flags& flags) {
  if (flags.Has("saved_model") == flags.Has("onnx")) return Usage("import needs one of --saved_model and --onnx");
  if (!flags.Has("out")) return Usage("import needs --out");
  const bool onnx = flags.Has("onnx");
  const std::filesystem::path source = flags.Get(onnx ? "onnx" : "saved_model");
  if (!onnx && !IsSavedModelDir(source)) return Fail(source.string() + ": no saved_model.pb, so not a SavedModel");
  auto model = onnx ? ReadOnnxModelFile(source) : ReadSavedModel(source);
  if (!model.ok()) return Fail(model.status().message());
  // Compiled first, so that only a model the server can serve is written.
  auto session = Session::Create(*model);
  if (!session.ok()) return Fail(source.string() + ": " + session.status().message());
  BundleWriteOptions options;
  options.overwrite = flags.Has("overwrite");
  if (!onnx) {
    auto assets = ReadAssets(source);
    if (!assets.ok()) return Fail(assets.status().message());
    options.assets = std::move(*assets);
  }
  Status status = WriteBundle(*model, flags.Get("out"), options);
  if (!status.ok()) return Fail(status.message());
  std::cout << "imported " << source.string() << " into " << flags.Get("out") << " (" << model->graph.nodes.size()
            << " nodes, " << model->weights.size() << " weights)\n";
  return 0;
}

int ExportOnnx(const Flags& flags) {
  if (!flags.Has("dir")) return Usage("export-onnx needs --dir");
  if (!flags.Has("out")) return Usage("export-onnx needs --out");
  const std::filesystem::path out = flags.Get("out");
  std::error_code ec;
  if (std::filesystem::exists(out, ec) && !flags.Has("overwrite")) {
    return Fail(out.string() + " exists (--overwrite replaces it)");
  }
  auto model = ReadModelDir(flags.Get("dir"));
  if (!model.ok()) return Fail(model.status().message());
  const std::string signature = flags.Get("signature", std::string(kDefaultSignature));
  Status status = WriteOnnxModel(*model, signature, out);
  if (!status.ok()) return Fail(flags.Get("dir") + ": " + status.message());
  std::cout << "exported signature '" << signature << "' of " << flags.Get("dir") << " to " << out.string()
            << " (ONNX opset " << kOnnxExportOpset << ")\n";
  return 0;
}

int MakeExampleCommand(const Flags& flags) {
  if (flags.positional.size() != 1) return Usage("make-example needs one example name");
  if (!flags.Has("out")) return Usage("make-example needs --out");
  auto model = MakeExample(flags.positional[0]);
  if (!model.ok()) return Fail(model.status().message());
  BundleWriteOptions options;
  options.overwrite = flags.Has("overwrite");
  Status status = WriteBundle(*model, flags.Get("out"), options);
  if (!status.ok()) return Fail(status.message());
  std::cout << "wrote " << flags.positional[0] << " to " << flags.Get("out") << "\n";
  return 0;
}

int WarmupCommand(const Flags& flags) {
  if (!flags.Has("from-log")) return Usage("warmup needs --from-log");
  if (!flags.Has("out")) return Usage("warmup needs --out");
  WarmupCutOptions options;
  options.patterns = flags.GetAll("from-log");
  options.out = flags.Get("out");
  options.model = flags.Get("model");
  options.overwrite = flags.Has("overwrite");
  for (const auto& [name, target] : {std::pair<const char*, int64_t*>{"max", &options.max_records},
                                     std::pair<const char*, int64_t*>{"seed", nullptr}}) {
    if (!flags.Has(name)) continue;
    const std::string text = flags.Get(name);
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
      return Usage("--" + std::string(name) + " must be a whole number, not '" + text + "'");
    }
    if (target != nullptr) {
      *target = value;
    } else {
      options.seed = static_cast<uint64_t>(value);
    }
  }
  StatusOr<WarmupCut> cut = CutWarmupFromLogs(options);
  if (!cut.ok()) return Fail(cut.status().message());
  std::cout << "wrote " << cut->kept << " of " << cut->records << " logged requests from " << cut->files
            << " file(s) to " << options.out << " (left out: " << cut->truncated << " truncated, " << cut->no_request
            << " without a request, " << cut->other_model << " of other models)\n";
  if (!cut->manifest.empty()) std::cout << "listed it in " << cut->manifest << "\n";
  return 0;
}

int Main(int argc, char** argv) {
  // Standard output carries the command's answer (JSON for `run`); logs go to stderr, and
  // only warnings unless SPDLOG_LEVEL (e.g. SPDLOG_LEVEL=info) says otherwise.
  auto logger = spdlog::stderr_color_mt("model-cli");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::warn);
  spdlog::cfg::load_env_levels();
  if (argc < 2) return Usage("missing command");
  std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return 0;
  }
  auto flags = ParseFlags(argc - 2, argv + 2, {"dir", "signature", "input", "out", "threads", "saved_model", "onnx", "from-log", "max", "model", "seed", "to", "version"}, {"all", "help", "overwrite"});
  if (!flags.ok()) return Usage(flags.status().message());
  if (flags->Has("help")) {
    std::cout << kUsage;
    return 0;
  }
  if (command != "make-example" && !flags->positional.empty()) {
    return Usage("unexpected argument '" + flags->positional[0] + "'");
  }
  if (command == "show") return Show(*flags);
  if (command == "run") return Run(*flags);
  if (command == "verify") return Verify(*flags);
  if (command == "import") return Import(*flags);
  if (command == "export-onnx") return ExportOnnx(*flags);
  if (command == "make-example") return MakeExampleCommand(*flags);
  if (command == "publish") return Publish(*flags);
  if (command == "warmup") return WarmupCommand(*flags);
  return Usage("unknown command '" + command + "'");
}

}  // namespace
}  // namespace lockstep

int main(int argc, char** argv) { return lockstep::Main(argc, argv); }
