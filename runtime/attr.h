// Node attributes: small typed values that configure an op (transpose flags, strides, axis).
// Tensors never live here; constants are graph nodes that refer to weights by name.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/shape.h"
#include "runtime/status.h"

namespace lockstep {

using AttrValue = std::variant<int64_t, double, std::string, bool, std::vector<int64_t>,
                               std::vector<double>, DType, Shape>;

class AttrMap {
 public:
  AttrMap() = default;
  AttrMap(std::initializer_list<std::pair<const std::string, AttrValue>> init) : values_(init) {}

  void Set(const std::string& name, AttrValue value) { values_[name] = std::move(value); }
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  const std::map<std::string, AttrValue>& values() const { return values_; }

  // Typed reads. The *Or forms return `fallback` when the attr is absent; all fail with a
  // message naming the attr when it is present with another type.
  StatusOr<int64_t> GetInt(const std::string& name) const;
  StatusOr<int64_t> GetIntOr(const std::string& name, int64_t fallback) const;
  StatusOr<double> GetFloatOr(const std::string& name, double fallback) const;
  StatusOr<std::string> GetString(const std::string& name) const;
  StatusOr<std::string> GetStringOr(const std::string& name, std::string fallback) const;
  // A view of the stored string (or of `fallback`), valid while the map is unchanged: kernels
  // read their string attrs per call without copying.
  StatusOr<std::string_view> GetStringViewOr(const std::string& name, std::string_view fallback) const;
  StatusOr<bool> GetBoolOr(const std::string& name, bool fallback) const;
  // A view of the stored list, valid while the map is unchanged (kernels read it per call
  // without copying).
  StatusOr<std::span<const int64_t>> GetInts(const std::string& name) const;
  StatusOr<DType> GetDType(const std::string& name) const;
  StatusOr<Shape> GetShape(const std::string& name) const;

  friend bool operator==(const AttrMap& a, const AttrMap& b) { return a.values_ == b.values_; }

 private:
  template <typename T>
  StatusOr<T> Get(const std::string& name, const char* type_name) const;
  std::map<std::string, AttrValue> values_;
};

}  // namespace lockstep
