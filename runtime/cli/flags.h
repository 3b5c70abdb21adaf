// Command-line flags for Lockstep's tools (model-cli, model-train): "--name value",
// "--name=value" and bare "--switch"; an unknown flag is an error naming it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "runtime/status.h"

namespace lockstep {

// Flags as given; repeated flags keep every value.
struct Flags {
  std::multimap<std::string, std::string> values;
  std::vector<std::string> positional;

  bool Has(const std::string& name) const { return values.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  std::vector<std::string> GetAll(const std::string& name) const;
};

// `with_value`: flags that take a value; `switches`: flags that take none.
StatusOr<Flags> ParseFlags(int argc, char** argv, const std::vector<std::string>& with_value,
                           const std::vector<std::string>& switches);

}  // namespace lockstep
