// Helpers for the ModelManager tests: configs, stepping the manager, serving a request.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "model_store/manager.h"
#include "tests/model_store/store_test_util.h"

namespace lockstep::store_test {

inline constexpr std::chrono::seconds kIdleTimeout{10};

inline ModelManager::Options ManualOptions() {
  ModelManager::Options o;
  o.file_system_poll_wait_seconds = 0;  // tests step the manager with PollNow()
  return o;
}

inline ModelConfig MakeModel(const std::string& name, const fs::path& base, VersionPolicy policy = {},
                             std::map<std::string, int64_t> labels = {}) {
  ModelConfig m;
  m.name = name;
  m.base_path = base.string();
  m.policy = std::move(policy);
  m.labels = std::move(labels);
  return m;
}

inline VersionPolicy Specific(std::vector<int64_t> versions) {
  return {VersionPolicy::kSpecific, 1, std::move(versions)};
}

inline StoreConfig Config(std::vector<ModelConfig> models) { return StoreConfig{std::move(models)}; }

// Lets the poll that ApplyConfig asked for and its loads finish, then polls once more.
inline ::testing::AssertionResult Settle(ModelManager& manager) {
  if (!manager.WaitUntilIdle(kIdleTimeout)) return ::testing::AssertionFailure() << "not idle after 10 s";
  manager.PollNow();
  if (!manager.WaitUntilIdle(kIdleTimeout)) return ::testing::AssertionFailure() << "not idle after 10 s";
  return ::testing::AssertionSuccess();
}

// Resolves and runs at x = 1: the answer is the version that served. -1 on any error.
inline float Serve(const ModelManager& manager, std::string_view model, std::optional<int64_t> version = std::nullopt,
                   std::optional<std::string_view> label = std::nullopt) {
  StatusOr<ServableHandle> handle = manager.Resolve(model, version, label);
  if (!handle.ok()) return -1.0f;
  StatusOr<float> y = RunOnce(**handle);
  return y.ok() ? *y : -1.0f;
}

inline VersionState StateOf(const ModelManager& manager, std::string_view model, int64_t version) {
  StatusOr<std::vector<VersionStatusInfo>> s = manager.GetModelStatus(model, version);
  if (!s.ok() || s->size() != 1) return VersionState::kUnknown;
  return (*s)[0].state;
}

}  // namespace lockstep::store_test
