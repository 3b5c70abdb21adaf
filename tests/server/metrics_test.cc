// The metrics library: counters, gauges and histograms render in Prometheus' text format (read
// back by a strict parser), label values are escaped, children are made once, and recording
// from many threads loses nothing.
#include "server/metrics.h"

#include <gtest/gtest.h>

#include <array>
#include <thread>
#include <vector>

#include "tests/common/prometheus_text.h"

namespace lockstep::metrics {
namespace {

using test::ParsePrometheusText;

TEST(MetricsTest, RendersEveryKindInTheTextFormat) {
  Registry registry;
  Family<Counter>& requests = registry.AddCounter("requests_total", "Requests.", {"model", "status"});
  Family<Gauge>& depth = registry.AddGauge("queue_depth", "Queued.", {});
  Family<Histogram>& latency = registry.AddHistogram("latency_seconds", "Latency.", {"model"}, {0.5, 0.1, 1});
  registry.AddCollector([](Exposition& out) {
    out.Family("build_info", "gauge", "Build.");
    const std::array<std::string_view, 1> names = {"version"};
    const std::array<std::string_view, 1> values = {"1.2.3"};
    out.Sample("build_info", names, values, 1);
  });
  requests.With({"a", "OK"})->Add(3);
  requests.With({"a", "NOT_FOUND"})->Add();
  requests.With({"quote\"back\\slash\nline", "OK"})->Add();
  depth.With({})->Set(7);
  for (double v : {0.05, 0.1, 0.3, 0.7, 5.0}) latency.With({"a"})->Observe(v);

  const std::string text = registry.Render();
  const test::PrometheusText parsed = ParsePrometheusText(text);
  ASSERT_EQ(parsed.error, "") << text;
  EXPECT_EQ(parsed.types.at("requests_total"), "counter");
  EXPECT_EQ(parsed.types.at("latency_seconds"), "histogram");
  EXPECT_EQ(parsed.Get(R"(requests_total{model="a",status="OK"})"), 3);
  EXPECT_EQ(parsed.Get(R"(requests_total{model="a",status="NOT_FOUND"})"), 1);
  EXPECT_NE(text.find(R"(model="quote\"back\\slash\nline")"), std::string::npos) << text;
  EXPECT_EQ(parsed.Get("queue_depth"), 7);
  // Bounds sorted; each bucket counts the observations at most its bound (0.1 is in le="0.1").
  EXPECT_EQ(parsed.Get(R"(latency_seconds_bucket{model="a",le="0.1"})"), 2);
  EXPECT_EQ(parsed.Get(R"(latency_seconds_bucket{model="a",le="0.5"})"), 3);
  EXPECT_EQ(parsed.Get(R"(latency_seconds_bucket{model="a",le="1"})"), 4);
  EXPECT_EQ(parsed.Get(R"(latency_seconds_bucket{model="a",le="+Inf"})"), 5);
  EXPECT_EQ(parsed.Get(R"(latency_seconds_count{model="a"})"), 5);
  EXPECT_DOUBLE_EQ(parsed.Get(R"(latency_seconds_sum{model="a"})"), 6.15);
  EXPECT_EQ(parsed.Get(R"(build_info{version="1.2.3"})"), 1);
  // A family with no children yet says nothing (no TYPE without samples).
  Registry empty;
  empty.AddCounter("nothing_total", "Nothing.", {"x"});
  EXPECT_EQ(empty.Render(), "");
}

TEST(MetricsTest, ChildrenAreMadeOnceAndCountEveryThread) {
  Registry registry;
  Family<Counter>& counter = registry.AddCounter("hits_total", "Hits.", {"who"});
  Family<Histogram>& histogram = registry.AddHistogram("size", "Size.", {"who"}, ExponentialBounds(1, 2, 4));
  EXPECT_EQ(counter.With({"a"}), counter.With({"a"}));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const std::string who = t % 2 == 0 ? "even" : "odd";
      for (int i = 0; i < 10000; ++i) {
        counter.With({who})->Add();
        histogram.With({who})->Observe(static_cast<double>(i % 10));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const test::PrometheusText parsed = ParsePrometheusText(registry.Render());
  ASSERT_EQ(parsed.error, "");
  EXPECT_EQ(parsed.Get(R"(hits_total{who="even"})"), 20000);
  EXPECT_EQ(parsed.Get(R"(hits_total{who="odd"})"), 20000);
  EXPECT_EQ(parsed.Get(R"(size_count{who="odd"})"), 20000);
  EXPECT_EQ(parsed.Get(R"(size_bucket{who="odd",le="8"})"), 18000);  // 0..8 of every 10
}

// A child erased while a recorder holds it lives until the recording ends, and the next
// recording makes a fresh one (ASan would see a recording into freed memory).
TEST(MetricsTest, ErasedChildrenGoOnlyOnceTheirLastRecordingEnds) {
  Registry registry;
  Family<Counter>& counter = registry.AddCounter("hits_total", "Hits.", {"model", "version"});
  counter.With({"m", "1"})->Add(5);
  counter.With({"m", "2"})->Add(7);
  const std::shared_ptr<Counter> held = counter.With({"m", "1"});
  EXPECT_EQ(counter.EraseIf([](std::span<const std::string> labels) { return labels[1] == "1"; }), 1u);
  held->Add();
  EXPECT_EQ(held->value(), 6u);
  test::PrometheusText parsed = ParsePrometheusText(registry.Render());
  EXPECT_EQ(parsed.samples.count(R"(hits_total{model="m",version="1"})"), 0u);
  EXPECT_EQ(parsed.Get(R"(hits_total{model="m",version="2"})"), 7);
  counter.With({"m", "1"})->Add();
  parsed = ParsePrometheusText(registry.Render());
  EXPECT_EQ(parsed.Get(R"(hits_total{model="m",version="1"})"), 1);
  EXPECT_EQ(counter.EraseIf([](std::span<const std::string>) { return false; }), 0u);
}

TEST(MetricsTest, TheParserRefusesWhatPrometheusWould) {
  EXPECT_NE(ParsePrometheusText("x 1\n").error, "");  // no TYPE
  EXPECT_NE(ParsePrometheusText("# TYPE x counter\nx{a=\"1} 1\n").error, "");
  EXPECT_NE(ParsePrometheusText("# TYPE 1x counter\n1x 1\n").error, "");
  EXPECT_NE(ParsePrometheusText("# TYPE x counter\nx one\n").error, "");
  EXPECT_NE(
      ParsePrometheusText("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n")
          .error,
      "");
  EXPECT_EQ(ParsePrometheusText("# TYPE x counter\nx{a=\"1\"} 1\n").error, "");
}

}  // namespace
}  // namespace lockstep::metrics
