#include "runtime/cli/flags.h"

#include <algorithm>

namespace lockstep {

std::string Flags::Get(const std::string& name, const std::string& fallback) const {
  auto it = values.find(name);
  return it == values.end() ? fallback : it->second;
}

std::vector<std::string> Flags::GetAll(const std::string& name) const {
  std::vector<std::string> out;
  for (auto [it, end] = values.equal_range(name); it != end; ++it) out.push_back(it->second);
  return out;
}

StatusOr<Flags> ParseFlags(int argc, char** argv, const std::vector<std::string>& with_value,
                           const std::vector<std::string>& switches) {
  Flags flags;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      flags.positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    size_t eq = name.find('=');
    bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (std::find(switches.begin(), switches.end(), name) != switches.end() && !inline_value) {
      flags.values.emplace(name, "true");
    } else if (std::find(with_value.begin(), with_value.end(), name) != with_value.end()) {
      if (!inline_value) {
        if (i + 1 >= argc) return InvalidArgument("flag --" + name + " needs a value");
        value = argv[++i];
      }
      flags.values.emplace(name, value);
    } else {
      return InvalidArgument("unknown flag --" + name);
    }
  }
  return flags;
}

}  // namespace lockstep
