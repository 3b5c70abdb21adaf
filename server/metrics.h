// Prometheus metrics: counters and histograms with labels, and the text exposition format
// (version 0.0.4) they are scraped in.
//
// A family is one metric name with its label names; each combination of label values is a
// child, made on first use and kept until EraseIf removes it. Recording to a child that exists
// takes a shared lock to find it, then atomics: no allocation, no exclusive lock. A recorder
// shares the child it records to, so a child erased meanwhile is freed after the recording
// (which then counts for nothing), never under it. Label
// values must come from a bounded set (model names the server serves, status codes), never
// from what a client sends unchecked, or the series would grow without bound.
//
// Values read at scrape time rather than recorded (version states, process memory) come from
// collectors: callbacks that write their families into the exposition as it is rendered.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::metrics {

class Counter {
 public:
  void Add(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Cumulative buckets with upper bounds `bounds` (ascending; +Inf is implied).
class Histogram {
 public:
  explicit Histogram(std::span<const double> bounds);
  void Observe(double v);

  std::span<const double> bounds() const { return bounds_; }
  // Observations at most bounds()[i] (i < bounds().size()), and in all (the +Inf bucket).
  uint64_t CumulativeCount(size_t i) const;
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // per bucket, not cumulative
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

// Bucket bounds: `count` bounds from `start`, each `factor` times the last.
std::vector<double> ExponentialBounds(double start, double factor, int count);

// Builds the text exposition: one Family() line pair per metric, then its samples.
class Exposition {
 public:
  // "# HELP" and "# TYPE" (counter, gauge, histogram, untyped).
  void Family(std::string_view name, std::string_view type, std::string_view help);
  // `name`{labels} value. Label values are escaped as the format requires.
  void Sample(std::string_view name, std::span<const std::string_view> label_names,
              std::span<const std::string_view> label_values, double value);
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// One metric name and its children. T is Counter, Gauge or Histogram.
template <typename T>
class Family {
 public:
  // The child for `values` (one per label name, in order), made on first use. Record to it
  // at once (`With(...)->Add()`): the handle is for the one recording, not to be kept.
  std::shared_ptr<T> With(std::span<const std::string_view> values);
  std::shared_ptr<T> With(std::initializer_list<std::string_view> values) {
    return With(std::span(values.begin(), values.size()));
  }
  // Removes the children whose label values `pred` holds true for; how many went.
  size_t EraseIf(const std::function<bool(std::span<const std::string>)>& pred);

  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> bounds);
  void Render(Exposition& out) const;
  // Calls `fn(label_values, child)` for every child, under the family's shared lock.
  void ForEach(const std::function<void(std::span<const std::string>, const T&)>& fn) const;

 private:
  struct Less {
    using is_transparent = void;
    bool operator()(const std::vector<std::string>& a, const std::vector<std::string>& b) const {
      return a < b;
    }
    bool operator()(const std::vector<std::string>& a, std::span<const std::string_view> b) const;
    bool operator()(std::span<const std::string_view> a, const std::vector<std::string>& b) const;
  };

  const std::string name_, help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;  // histograms only
  mutable std::shared_mutex mu_;
  std::map<std::vector<std::string>, std::shared_ptr<T>, Less> children_;
};

class Registry {
 public:
  Family<Counter>& AddCounter(std::string name, std::string help, std::vector<std::string> label_names);
  Family<Gauge>& AddGauge(std::string name, std::string help, std::vector<std::string> label_names);
  Family<Histogram>& AddHistogram(std::string name, std::string help, std::vector<std::string> label_names,
                                  std::vector<double> bounds);
  // Called at every render, after the recorded families, in the order added.
  void AddCollector(std::function<void(Exposition&)> collector);

  // The whole exposition (Content-Type: text/plain; version=0.0.4).
  std::string Render() const;

 private:
  std::vector<std::unique_ptr<Family<Counter>>> counters_;
  std::vector<std::unique_ptr<Family<Gauge>>> gauges_;
  std::vector<std::unique_ptr<Family<Histogram>>> histograms_;
  // Every family's Render and every collector, in the order they were added.
  std::vector<std::function<void(Exposition&)>> renderers_;
};

inline constexpr std::string_view kExpositionContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace lockstep::metrics
