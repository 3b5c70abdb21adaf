// `--name=value` flags for the serving benchmark's three programs. Hand-parsed because each
// takes a handful of flags and a bench must not pull in a flags library the product lacks.
#pragma once

#include <charconv>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace lockstep::bench {

class Flags {
 public:
  // Returns nullopt (after printing why to stderr) for an argument that is not
  // `--name=value` or names a flag outside `known`.
  static std::optional<Flags> Parse(int argc, char** argv, const std::set<std::string>& known) {
    Flags flags;
    for (int i = 1; i < argc; ++i) {
      std::string_view arg = argv[i];
      size_t eq = arg.find('=');
      if (!arg.starts_with("--") || eq == std::string_view::npos) {
        std::fprintf(stderr, "bad argument '%s': expected --name=value\n", argv[i]);
        return std::nullopt;
      }
      std::string name(arg.substr(2, eq - 2));
      if (!known.contains(name)) {
        std::fprintf(stderr, "unknown flag --%s\n", name.c_str());
        return std::nullopt;
      }
      flags.values_[name] = std::string(arg.substr(eq + 1));
    }
    return flags;
  }

  std::string Get(const std::string& name, std::string fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }

  // The flag as a number of type T; nullopt (after printing why) when it is not one.
  template <typename T>
  std::optional<T> Number(const std::string& name, T fallback) const {
    auto it = values_.find(name);
    if (it == values_.end()) return fallback;
    std::optional<T> value = ParseNumber<T>(it->second);
    if (!value) std::fprintf(stderr, "--%s: '%s' is not a number\n", name.c_str(), it->second.c_str());
    return value;
  }

  template <typename T>
  static std::optional<T> ParseNumber(std::string_view text) {
    T value{};
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
  }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace lockstep::bench
