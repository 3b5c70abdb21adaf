// Reads model-train's JSON config one object at a time, naming the file and field of every
// error: each Get takes a known key (absent: the default stays), Finish rejects the keys nobody
// asked for, with a suggestion when one looks like a misspelling. The first error is kept in
// *error; later calls do nothing once there is one. config.cc reads the config's sections with
// it, and each layer type (training/layers/) its own keys.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/status.h"

namespace lockstep::training {

using Json = nlohmann::json;

// `v` as JSON, cut to 40 characters, for messages.
std::string Shown(const Json& v);

class ConfigFields {
 public:
  // `object` may be null (the section is absent: every Get keeps its default); `path` names it
  // in messages ("model.layers[2]"), `source` the file.
  ConfigFields(const Json* object, std::string path, std::string_view source, Status* error);

  // A string, one of `allowed` when that is not empty.
  void Get(std::string_view key, std::string& out, std::initializer_list<std::string_view> allowed = {});
  void Get(std::string_view key, std::string& out, const std::vector<std::string_view>& allowed);
  // An integer in [min, max].
  void Get(std::string_view key, int64_t& out, int64_t min, int64_t max = std::numeric_limits<int64_t>::max());
  void Get(std::string_view key, int& out, int min, int max);
  void Get(std::string_view key, uint64_t& out);
  // In [min, max], or (min, max] when min_exclusive.
  void Get(std::string_view key, double& out, double min, double max, bool min_exclusive = false);
  void Get(std::string_view key, bool& out);
  // A list of strings; a single string counts as a list of one.
  void Get(std::string_view key, std::vector<std::string>& out);
  // A list of integers, each at least `min`.
  void Get(std::string_view key, std::vector<int64_t>& out, int64_t min);

  // A nested value (object or array) for the caller to read, or null when absent.
  const Json* Nested(std::string_view key) { return Take(key); }
  // "path.key", as messages name it.
  std::string PathOf(std::string_view key) const;
  // Fails for the first key that no Get asked for.
  void Finish();
  // Keeps "source: path.key: message" as the error, unless there is one already.
  void Fail(const std::string& message, std::string_view key);

 private:
  const Json* Take(std::string_view key);
  static std::string Range(double min, double max, bool min_exclusive);

  const Json* object_;
  std::string path_;
  std::string_view source_;
  Status* error_;
  std::set<std::string> known_;
  std::vector<std::string> known_asked_;
};

}  // namespace lockstep::training
