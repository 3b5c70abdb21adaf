// The model store's configuration as plain values: which models to serve, from where, which
// of their versions, and the labels that name versions. The server translates TensorFlow
// Serving's text-proto ModelServerConfig into these structs; nothing here knows protobuf.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
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

// One arm of a traffic split (Lockstep's, not TF Serving's): where a share of the requests
// that name no version and no label go. Routing: traffic_split.h.
struct TrafficArm {
  std::string label;    // a label of the model's (the arm follows the label when it moves),
  int64_t version = 0;  // or, when label is empty, a version
  uint32_t weight = 0;  // relative to the other arms'

  // "label:canary" or "version:2": the arm's identity in routing hashes, logs and metrics.
  std::string Name() const;
  bool operator==(const TrafficArm&) const = default;
};

// Shadow traffic (Lockstep's): a copy of `percent` % of the model's predict requests also runs
// on a candidate, whose answers go to the metrics only.
struct ShadowTraffic {
  std::string label;    // a label of the model's,
  int64_t version = 0;  // or, when label is empty, a version
  double percent = 0;   // in (0, 100]

  bool operator==(const ShadowTraffic&) const = default;
};

struct ModelConfig {
  std::string name;
  std::string base_path;  // holds <base_path>/<version>/ bundles
  std::string platform;   // informational here; the server decides which platforms it accepts
  VersionPolicy policy;
  std::map<std::string, int64_t> labels;  // "stable" -> 42
  // Empty: requests that name no version and no label get the highest available version.
  std::vector<TrafficArm> traffic;
  std::optional<ShadowTraffic> shadow;
  // Serve float32 matrix products and convolutions on the bf16 matmul core
  // (SessionOptions::bf16_products).
  bool bf16_products = false;
  // How a new version replaces an old one (Lockstep's, per model): load the new one first and
  // then unload the old (availability preserving, TF Serving's default), or unload the old one
  // first, wait until it is freed, then load the new (resource preserving: one copy in memory,
  // the model unavailable in between). manager.h.
  enum class Transition { kAvailabilityPreserving, kResourcePreserving };
  Transition transition = Transition::kAvailabilityPreserving;
  // The threads a request to this model computes on: > 0, a pool of its own per loaded version
  // (the caller and intra_op_threads - 1 workers); 0, the manager's SessionOptions::pool (the
  // server's shared one).
  int intra_op_threads = 0;

  bool operator==(const ModelConfig&) const = default;
};

inline constexpr int kMaxIntraOpThreads = 1024;

struct StoreConfig {
  std::vector<ModelConfig> models;
};

// Checks everything that can be checked without looking at the disk or at what is loaded:
// unique, non-empty names of safe characters (a name ends up in URLs, logs and paths, so it
// may hold no '/', '\\', "..", or control characters), absolute base paths, a sensible policy,
// labels with names and positive versions, and traffic arms that each name one of the model's
// labels or a positive version, once, with weights not all 0, and intra_op_threads in
// [0, kMaxIntraOpThreads]. The message names the model and the field.
Status ValidateStoreConfig(const StoreConfig& config);

}  // namespace lockstep
