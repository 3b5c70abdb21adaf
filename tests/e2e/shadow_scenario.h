// The shadow scenario, shared by ShadowTrafficTest (traffic_split_test.cc) and the
// shadow-and-reload stress (reload_stress_test.cc): model "m" with version 1 (y = x), version
// 2 (y = 2x) and version 3 (y = x again), labelled stable = 1, same = 3 and double = 2, every
// request version 1 answers copied to the shadow label.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tests/e2e/server_harness.h"

namespace lockstep::e2e {

inline void WriteShadowScenarioModels(const fs::path& base) {
  WriteVersionModel(base, 1);
  WriteVersionModel(base, 2);
  const Status s = WriteBundle(AffineModel(1.0f, 0.0f), base / "3");
  ASSERT_TRUE(s.ok()) << s.ToString();
}

// The config serving every version of "m" at `base` with the scenario's labels, shadowing to
// `shadow_label` ("same" agrees with version 1, "double" disagrees).
inline std::string ShadowConfig(const fs::path& base, const std::string& shadow_label) {
  return "model_config_list { config { name: \"m\" base_path: \"" + base.string() +
         "\" model_version_policy { all {} }"
         " version_labels { key: \"stable\" value: 1 } version_labels { key: \"same\" value: 3 }"
         " version_labels { key: \"double\" value: 2 }"
         " traffic_split { shadow { label: \"" +
         shadow_label + "\" percent: 100 } } } }";
}

}  // namespace lockstep::e2e
