#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <mutex>

namespace lockstep::metrics {
namespace {

void AppendValue(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    char buffer[32];
    const auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), v);
    out.append(buffer, end);
  }
}

// Label values: backslash, double quote and newline escaped, as the format says.
void AppendEscaped(std::string& out, std::string_view value) {
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

int Compare(std::span<const std::string> a, std::span<const std::string_view> b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (const int c = std::string_view(a[i]).compare(b[i]); c != 0) return c;
  }
  return a.size() < b.size() ? -1 : a.size() > b.size() ? 1 : 0;
}

}  // namespace

Histogram::Histogram(std::span<const double> bounds)
    : bounds_(bounds.begin(), bounds.end()),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds.size() + 1)) {}

void Histogram::Observe(double v) {
  const size_t bucket =
      static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

uint64_t Histogram::CumulativeCount(size_t i) const {
  uint64_t total = 0;
  for (size_t b = 0; b <= i && b <= bounds_.size(); ++b) total += buckets_[b].load(std::memory_order_relaxed);
  return total;
}

std::vector<double> ExponentialBounds(double start, double factor, int count) {
  std::vector<double> bounds;
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor) bounds.push_back(b);
  return bounds;
}

void Exposition::Family(std::string_view name, std::string_view type, std::string_view help) {
  text_ += "# HELP ";
  text_ += name;
  text_ += ' ';
  for (char c : help) text_ += c == '\n' ? ' ' : c;
  text_ += "\n# TYPE ";
  text_ += name;
  text_ += ' ';
  text_ += type;
  text_ += '\n';
}

void Exposition::Sample(std::string_view name, std::span<const std::string_view> label_names,
                        std::span<const std::string_view> label_values, double value) {
  text_ += name;
  if (!label_names.empty()) {
    text_ += '{';
    for (size_t i = 0; i < label_names.size(); ++i) {
      if (i > 0) text_ += ',';
      text_ += label_names[i];
      text_ += "=\"";
      AppendEscaped(text_, label_values[i]);
      text_ += '"';
    }
    text_ += '}';
  }
  text_ += ' ';
  AppendValue(text_, value);
  text_ += '\n';
}

template <typename T>
bool Family<T>::Less::operator()(const std::vector<std::string>& a,
                                 std::span<const std::string_view> b) const {
  return Compare(a, b) < 0;
}

template <typename T>
bool Family<T>::Less::operator()(std::span<const std::string_view> a,
                                 const std::vector<std::string>& b) const {
  return Compare(b, a) > 0;
}

template <typename T>
Family<T>::Family(std::string name, std::string help, std::vector<std::string> label_names,
                  std::vector<double> bounds)
    : name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      bounds_(std::move(bounds)) {}

template <typename T>
std::shared_ptr<T> Family<T>::With(std::span<const std::string_view> values) {
  {
    std::shared_lock lock(mu_);
    if (const auto it = children_.find(values); it != children_.end()) return it->second;
  }
  std::unique_lock lock(mu_);
  if (const auto it = children_.find(values); it != children_.end()) return it->second;
  std::vector<std::string> key(values.begin(), values.end());
  key.resize(label_names_.size());  // a caller that gave too few values gets empty ones
  std::shared_ptr<T> child;
  if constexpr (std::is_same_v<T, Histogram>) {
    child = std::make_shared<T>(bounds_);
  } else {
    child = std::make_shared<T>();
  }
  return children_.emplace(std::move(key), std::move(child)).first->second;
}

template <typename T>
size_t Family<T>::EraseIf(const std::function<bool(std::span<const std::string>)>& pred) {
  std::unique_lock lock(mu_);
  return std::erase_if(children_, [&](const auto& kv) { return pred(kv.first); });
}

template <typename T>
void Family<T>::Render(Exposition& out) const {
  std::shared_lock lock(mu_);
  if (children_.empty()) return;
  std::vector<std::string_view> names(label_names_.begin(), label_names_.end());
  if constexpr (std::is_same_v<T, Histogram>) {
    out.Family(name_, "histogram", help_);
    const std::string bucket = name_ + "_bucket", sum = name_ + "_sum", count = name_ + "_count";
    std::vector<std::string_view> bucket_names = names;
    bucket_names.push_back("le");
    for (const auto& [key, h] : children_) {
      std::vector<std::string_view> values(key.begin(), key.end());
      std::vector<std::string_view> bucket_values = values;
      bucket_values.push_back("");
      std::string le;
      for (size_t i = 0; i <= h->bounds().size(); ++i) {
        le.clear();
        if (i < h->bounds().size()) {
          AppendValue(le, h->bounds()[i]);
        } else {
          le = "+Inf";
        }
        bucket_values.back() = le;
        out.Sample(bucket, bucket_names, bucket_values, static_cast<double>(h->CumulativeCount(i)));
      }
      out.Sample(sum, names, values, h->sum());
      out.Sample(count, names, values, static_cast<double>(h->count()));
    }
  } else {
    out.Family(name_, std::is_same_v<T, Counter> ? "counter" : "gauge", help_);
    for (const auto& [key, child] : children_) {
      std::vector<std::string_view> values(key.begin(), key.end());
      out.Sample(name_, names, values, static_cast<double>(child->value()));
    }
  }
}

template <typename T>
void Family<T>::ForEach(const std::function<void(std::span<const std::string>, const T&)>& fn) const {
  std::shared_lock lock(mu_);
  for (const auto& [key, child] : children_) fn(key, *child);
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

Family<Counter>& Registry::AddCounter(std::string name, std::string help,
                                      std::vector<std::string> label_names) {
  counters_.push_back(std::make_unique<Family<Counter>>(std::move(name), std::move(help),
                                                        std::move(label_names), std::vector<double>{}));
  Family<Counter>* family = counters_.back().get();
  renderers_.push_back([family](Exposition& out) { family->Render(out); });
  return *family;
}

Family<Gauge>& Registry::AddGauge(std::string name, std::string help, std::vector<std::string> label_names) {
  gauges_.push_back(std::make_unique<Family<Gauge>>(std::move(name), std::move(help), std::move(label_names),
                                                    std::vector<double>{}));
  Family<Gauge>* family = gauges_.back().get();
  renderers_.push_back([family](Exposition& out) { family->Render(out); });
  return *family;
}

Family<Histogram>& Registry::AddHistogram(std::string name, std::string help,
                                          std::vector<std::string> label_names, std::vector<double> bounds) {
  std::sort(bounds.begin(), bounds.end());
  histograms_.push_back(std::make_unique<Family<Histogram>>(std::move(name), std::move(help),
                                                            std::move(label_names), std::move(bounds)));
  Family<Histogram>* family = histograms_.back().get();
  renderers_.push_back([family](Exposition& out) { family->Render(out); });
  return *family;
}

void Registry::AddCollector(std::function<void(Exposition&)> collector) {
  renderers_.push_back(std::move(collector));
}

std::string Registry::Render() const {
  Exposition out;
  for (const auto& render : renderers_) render(out);
  return out.text();
}

}  // namespace lockstep::metrics
