// What the serving allocation tests serve: model "m", y = 2x on x of shape [-1], loaded by a
// manager, with the metrics, health and (idle) shadow runner a request path records into.
#pragma once

#include <gtest/gtest.h>

#include "server/health.h"
#include "server/serving_metrics.h"
#include "server/shadow.h"
#include "tests/model_store/manager_test_util.h"

namespace lockstep::alloc_test {

class ServedDoubler : public ::testing::Test {
 protected:
  void SetUp() override {
    store_test::WriteVersion(dir_.path() / "m", 2);
    ASSERT_TRUE(manager_.ApplyConfig(store_test::Config({store_test::MakeModel("m", dir_.path() / "m")})).ok());
    ASSERT_TRUE(store_test::Settle(manager_));
    health_.SetStarted();
  }

  store_test::ScratchDir dir_;
  ModelManager manager_{store_test::ManualOptions()};
  ServingMetrics metrics_{manager_};
  ServerHealth health_{manager_};
  ShadowRunner shadow_{metrics_};
};

}  // namespace lockstep::alloc_test
