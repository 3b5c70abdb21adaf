#include "training/config_fields.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace lockstep::training {
namespace {

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string Shown(const Json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 40) + "..." : s;
}

ConfigFields::ConfigFields(const Json* object, std::string path, std::string_view source, Status* error)
    : object_(object), path_(std::move(path)), source_(source), error_(error) {
  if (object_ != nullptr && !object_->is_object()) {
    Fail(path_.empty() ? "the config must be a JSON object" : "must be an object, got " + Shown(*object_), "");
    object_ = nullptr;
  }
}

void ConfigFields::Get(std::string_view key, std::string& out, std::initializer_list<std::string_view> allowed) {
  Get(key, out, std::vector<std::string_view>(allowed));
}

void ConfigFields::Get(std::string_view key, std::string& out, const std::vector<std::string_view>& allowed) {
  const Json* v = Take(key);
  if (v == nullptr) return;
  if (!v->is_string()) return Fail("must be a string, got " + Shown(*v), key);
  const std::string s = v->get<std::string>();
  if (allowed.size() > 0 && std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
    std::string list;
    for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a.empty() ? "\"\"" : a);
    return Fail("must be one of " + list + ", got \"" + s + "\"", key);
  }
  out = s;
}

void ConfigFields::Get(std::string_view key, int64_t& out, int64_t min, int64_t max) {
  const Json* v = Take(key);
  if (v == nullptr) return;
  if (!v->is_number_integer()) return Fail("must be an integer, got " + Shown(*v), key);
  const bool too_big = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max);
  const int64_t x = too_big ? max : v->get<int64_t>();
  if (too_big || x < min || x > max) {
    return Fail(Range(static_cast<double>(min), static_cast<double>(max), false) + ", got " + Shown(*v), key);
  }
  out = x;
}

void ConfigFields::Get(std::string_view key, int& out, int min, int max) {
  int64_t x = out;
  Get(key, x, min, max);
  out = static_cast<int>(x);
}

void ConfigFields::Get(std::string_view key, uint64_t& out) {
  const Json* v = Take(key);
  if (v == nullptr) return;
  if (!v->is_number_integer() || (!v->is_number_unsigned() && v->get<int64_t>() < 0)) {
    return Fail("must be a non-negative integer, got " + Shown(*v), key);
  }
  out = v->get<uint64_t>();
}

void ConfigFields::Get(std::string_view key, double& out, double min, double max, bool min_exclusive) {
  const Json* v = Take(key);
  if (v == nullptr) return;
  if (!v->is_number()) return Fail("must be a number, got " + Shown(*v), key);
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < min || x > max || (min_exclusive && x == min)) {
    return Fail(Range(min, max, min_exclusive) + ", got " + Shown(*v), key);
  }
  out = x;
}

void ConfigFields::Get(std::string_view key, bool& out) {
  const Json* v = Take(key);
  if (v == nullptr) return;
  if (!v->is_boolean()) return Fail("must be true or false, got " + Shown(*v), key);
  out = v->get<bool>();
}

void ConfigFields::Get(std::string_view key, std::vector<std::string>& out) {
  const Json* v = Take(key);
  if (v == nullptr) return;
  if (v->is_string()) {
    out = {v->get<std::string>()};
    return;
  }
  if (!v->is_array()) return Fail("must be a string or a list of strings, got " + Shown(*v), key);
  std::vector<std::string> list;
  for (const Json& item : *v) {
    if (!item.is_string()) return Fail("must be a list of strings, got " + Shown(item) + " in it", key);
    list.push_back(item.get<std::string>());
  }
  out = std::move(list);
}

void ConfigFields::Get(std::string_view key, std::vector<int64_t>& out, int64_t min) {
  const Json* v = Take(key);
  if (v == nullptr) return;
  if (!v->is_array()) return Fail("must be a list of integers, got " + Shown(*v), key);
  std::vector<int64_t> list;
  for (const Json& item : *v) {
    if (!item.is_number_integer() || item.get<int64_t>() < min) {
      return Fail("must be a list of integers >= " + std::to_string(min) + ", got " + Shown(item) + " in it", key);
    }
    list.push_back(item.get<int64_t>());
  }
  out = std::move(list);
}

std::string ConfigFields::PathOf(std::string_view key) const {
  if (key.empty()) return path_;
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

void ConfigFields::Finish() {
  if (object_ == nullptr || !error_->ok()) return;
  for (const auto& [key, value] : object_->items()) {
    if (known_.count(key) != 0) continue;
    std::string hint;
    size_t best = 3;  // suggest only close misspellings
    for (const std::string& k : known_asked_) {
      const size_t d = EditDistance(key, k);
      if (d < best) {
        best = d;
        hint = " (did you mean '" + k + "'?)";
      }
    }
    std::string list;
    for (const std::string& k : known_asked_) list += (list.empty() ? "" : ", ") + k;
    return Fail("unknown key" + hint + "; known keys: " + list, key);
  }
}

void ConfigFields::Fail(const std::string& message, std::string_view key) {
  if (!error_->ok()) return;
  const std::string where = key.empty() && path_.empty() ? "" : PathOf(key) + ": ";
  *error_ = InvalidArgument(std::string(source_) + ": " + where + message);
}

const Json* ConfigFields::Take(std::string_view key) {
  known_.insert(std::string(key));
  known_asked_.push_back(std::string(key));
  if (object_ == nullptr || !error_->ok()) return nullptr;
  auto it = object_->find(key);
  if (it == object_->end() || it->is_null()) return nullptr;
  return &*it;
}

std::string ConfigFields::Range(double min, double max, bool min_exclusive) {
  auto show = [](double x) {
    std::ostringstream s;
    s << x;
    return s.str();
  };
  const bool unbounded =
      max >= static_cast<double>(std::numeric_limits<int64_t>::max()) || max == std::numeric_limits<double>::infinity();
  const std::string low = (min_exclusive ? "> " : ">= ") + show(min);
  return unbounded ? "must be " + low : "must be " + low + " and <= " + show(max);
}

}  // namespace lockstep::training
