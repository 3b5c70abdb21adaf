// A warmed-up REST predict allocates nothing when its shape repeats: RestApi::Start on a
// connection's reused call parses the path, reads the body (the fast reader, into the call's
// tensors), runs the graph into the call's outputs, records the metrics and writes the JSON
// answer into the call's buffer. (The HTTP transport around it is Beast's; Warm means settled:
// 20 requests allocate nothing once five rounds in a row have not.)
#include <gtest/gtest.h>

#include <string>

#include "server/rest_api.h"
#include "tests/alloc/counting_new.h"
#include "tests/alloc/served_doubler.h"

namespace lockstep {
namespace {


class CountingPredictRestCall final : public RestCall {
 public:
  int answered = 0;

 private:
  void OnAnswered() override { ++answered; }
};

std::string Row(int n) {
  std::string row;
  for (int i = 0; i < n; ++i) row += (i ? ", " : "") + std::to_string(0.01 * (i % 97));
  return row;
}

class RestPredictAllocTest : public alloc_test::ServedDoubler, public ::testing::WithParamInterface<const char*> {};

TEST_P(RestPredictAllocTest, AWarmedUpPredictOfARepeatedShapeAllocatesNothing) {
  const RestApi api(manager_, metrics_, health_, shadow_, /*batching=*/nullptr);

  std::string body = GetParam();
  body.replace(body.find("ROW"), 3, Row(784));
  RestRequest request;
  request.method = "POST";
  request.target = "/v1/models/m:predict";
  request.body = body;
  CountingPredictRestCall call;
  auto predict = [&] {
    const int answered = call.answered;
    api.Start(request, &call);
    ASSERT_EQ(call.answered, answered + 1);
    ASSERT_EQ(call.response.http_status, 200) << call.response.body;
  };
  predict();
  EXPECT_EQ(call.response.body.rfind("{\"", 0), 0u) << call.response.body;
  EXPECT_NE(call.response.body.find("[0.0, 0.02, 0.04, "), std::string::npos) << call.response.body.substr(0, 80);
  for (int round = 0, quiet = 0; quiet < 5; ++round) {
    ASSERT_LT(round, 200) << "still allocates after 200 warm-up rounds";
    const int64_t start = alloc_test::Allocations();
    predict();
    quiet = alloc_test::Allocations() == start ? quiet + 1 : 0;
  }
  const int64_t before = alloc_test::Allocations();
  for (int i = 0; i < 20; ++i) predict();
  EXPECT_EQ(alloc_test::Allocations() - before, 0) << "allocations in 20 warmed-up predicts";
}

INSTANTIATE_TEST_SUITE_P(Forms, RestPredictAllocTest,
                         ::testing::Values(R"({"instances": [ROW]})", R"({"inputs": {"x": [ROW]}})",
                                           R"({"signature_name": "serving_default", "inputs": [ROW]})"));

}  // namespace
}  // namespace lockstep
