// A strict reader of Prometheus' text exposition format (0.0.4) for the tests: it checks what a
// Prometheus server would refuse (a sample before its family's TYPE, a bad metric or label
// name, a malformed value, histogram buckets that do not add up) and gives the samples back
// as "name{label="value",...}" -> value, labels in the order written.
#pragma once

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace lockstep::test {

struct PrometheusText {
  std::map<std::string, std::string> types;  // family name -> counter, gauge, histogram, ...
  std::map<std::string, double> samples;     // series -> value
  std::string error;                         // empty when the text is valid

  double Get(const std::string& series, double missing = NAN) const {
    const auto it = samples.find(series);
    return it == samples.end() ? missing : it->second;
  }
  // The sum over the series of `name` whose labels contain every `label="value"` in `with`.
  double Sum(const std::string& name, const std::string& with = "") const {
    double sum = 0;
    for (const auto& [series, value] : samples) {
      if (series.rfind(name + "{", 0) != 0 && series != name) continue;
      bool all = true;
      std::istringstream parts(with);
      for (std::string part; std::getline(parts, part, ',');)
        all = all && series.find(part) != std::string::npos;
      if (all) sum += value;
    }
    return sum;
  }
};

inline bool ValidMetricName(const std::string& n) {
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
  for (char c : n) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ':') return false;
  }
  return true;
}

inline PrometheusText ParsePrometheusText(const std::string& text) {
  PrometheusText out;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  auto fail = [&](const std::string& why) {
    if (out.error.empty()) out.error = "line " + std::to_string(number) + ": " + why + ": " + line;
  };
  while (std::getline(lines, line)) {
    ++number;
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream f(line.substr(7));
      std::string name, type;
      f >> name >> type;
      if (!ValidMetricName(name)) fail("bad family name");
      if (out.types.count(name) != 0) fail("a second TYPE for the family");
      out.types[name] = type;
      continue;
    }
    if (line[0] == '#') continue;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    const std::string name = line.substr(0, i);
    if (!ValidMetricName(name)) fail("bad metric name");
    std::string series = name;
    if (i < line.size() && line[i] == '{') {
      series += '{';
      ++i;
      bool first = true;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
          fail("bad label");
          break;
        }
        const std::string label = line.substr(i, eq - i);
        if (!ValidMetricName(label) || label.find(':') != std::string::npos) fail("bad label name");
        std::string value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) ++j;
          value += line[j];
        }
        if (j >= line.size()) {
          fail("unterminated label value");
          break;
        }
        series += (first ? "" : ",") + label + "=\"" + value + "\"";
        first = false;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      series += '}';
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') {
      fail("no value");
      continue;
    }
    const std::string value = line.substr(i + 1);
    double v = 0;
    if (value == "+Inf") {
      v = INFINITY;
    } else if (value == "-Inf") {
      v = -INFINITY;
    } else if (value == "NaN") {
      v = NAN;
    } else {
      char* end = nullptr;
      v = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0') fail("bad value");
    }
    // A sample belongs to the family it is named after (a histogram's _bucket, _sum, _count).
    std::string family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (out.types.count(family) == 0 && name.size() > s.size() &&
          name.compare(name.size() - s.size(), s.size(), s) == 0 &&
          out.types.count(name.substr(0, name.size() - s.size())) != 0) {
        family = name.substr(0, name.size() - s.size());
      }
    }
    if (out.types.count(family) == 0) fail("a sample before its family's TYPE");
    if (out.samples.count(series) != 0) fail("a series twice");
    out.samples[series] = v;
  }
  // Histograms: buckets ascend with le, never decrease, and +Inf equals _count.
  for (const auto& [family, type] : out.types) {
    if (type != "histogram") continue;
    std::map<std::string, std::map<double, double>> buckets;  // series labels without le -> le -> count
    for (const auto& [series, value] : out.samples) {
      if (series.rfind(family + "_bucket{", 0) != 0) continue;
      const size_t le = series.find("le=\"");
      if (le == std::string::npos) {
        out.error = "a bucket without le: " + series;
        continue;
      }
      const size_t end = series.find('"', le + 4);
      const std::string bound = series.substr(le + 4, end - le - 4);
      std::string rest = series.substr(family.size() + 8, le - family.size() - 8) + series.substr(end + 1);
      if (!rest.empty() && rest.back() == '}') rest.pop_back();
      if (!rest.empty() && rest.back() == ',') rest.pop_back();
      buckets[rest][bound == "+Inf" ? INFINITY : std::strtod(bound.c_str(), nullptr)] = value;
    }
    for (const auto& [labels, by_le] : buckets) {
      double last = 0;
      for (const auto& [le, count] : by_le) {
        if (count < last) out.error = family + " buckets decrease for {" + labels + "}";
        last = count;
      }
      const std::string count_series = family + "_count" + (labels.empty() ? "" : "{" + labels + "}");
      if (by_le.count(INFINITY) == 0 || out.Get(count_series) != by_le.at(INFINITY)) {
        out.error = family + ": the +Inf bucket is not _count for {" + labels + "}";
      }
    }
  }
  return out;
}

}  // namespace lockstep::test
