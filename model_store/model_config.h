// The model store's configuration as plain values: which models to serve, from where, which
// of their versions, and the labels that name versions. The server translates TensorFlow
// Serving's text-proto ModelServerConfig into these structs; nothing here knows protobuf.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/status.h"

namespace lockstep {

// TF Serving's ServableVersionPolicy. The default is latest 1, as in TF Serving.
struct VersionPolicy {
  enum Kind { kLatest, kAll, kSpecific };
  Kind kind = kLatest;
  uint32_t num_versions = 1;        // kLatest: serve the N highest versions on disk
  std::vector<int64_t> versions;    // kSpecific: serve these, where they exist on disk

  bool operator==(const VersionPolicy&) const = default;
};

struct ModelConfig {
  std::string name;
  std::string base_path;  // holds <base_path>/<version>/ bundles
  std::string platform;   // informational here; the server decides which platforms it accepts
  VersionPolicy policy;
  std::map<std::string, int64_t> labels;  // "stable" -> 42

  bool operator==(const ModelConfig&) const = default;
};

struct StoreConfig {
  std::vector<ModelConfig> models;
};

// Checks everything that can be checked without looking at the disk or at what is loaded:
// unique, non-empty names of safe characters (a name ends up in URLs, logs and paths, so it
// may hold no '/', '\\', "..", or control characters), absolute base paths, a sensible policy,
// and labels with names and positive versions. The message names the model and the field.
Status ValidateStoreConfig(const StoreConfig& config);

}  // namespace lockstep
