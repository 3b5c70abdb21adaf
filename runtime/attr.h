// Node attributes: small typed values that configure an op (transpose flags, strides, axis),
// and the bodies of control flow (a branch, a loop's body) as graphs of their own. Tensors
// never live here; constants are graph nodes that refer to weights by name.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/shape.h"
#include "runtime/status.h"

namespace lockstep {

// A subgraph (runtime/graph.h): a pure function of its signature's inputs, holding no Const or
// Variable node (what it reads of the enclosing graph, weights included, comes in as inputs),
// so that it has no weights of its own and serialises with its node.
struct Graph;
using SubgraphAttr = std::shared_ptr<const Graph>;

using AttrValue = std::variant<int64_t, double, std::string, bool, std::vector<int64_t>,
                               std::vector<double>, DType, Shape, SubgraphAttr>;

class AttrMap {
 public:
  AttrMap() = default;
  AttrMap(std::initializer_list<std::pair<const std::string, AttrValue>> init) : values_(init) {}

  void Set(const std::string& name, AttrValue value) { values_[name] = std::move(value); }
  bool Has(std::string_view name) const { return values_.find(name) != values_.end(); }
  const std::map<std::string, AttrValue, std::less<>>& values() const { return values_; }

  // Typed reads. The *Or forms return `fallback` when the attr is absent; all fail with a
  // message naming the attr when it is present with another type. Names are views, so a
  // kernel's per-call read of an attr with a long name allocates nothing.
  StatusOr<int64_t> GetInt(std::string_view name) const;
  StatusOr<int64_t> GetIntOr(std::string_view name, int64_t fallback) const;
  StatusOr<double> GetFloatOr(std::string_view name, double fallback) const;
  StatusOr<std::string> GetString(std::string_view name) const;
  StatusOr<std::string> GetStringOr(std::string_view name, std::string fallback) const;
  // A view of the stored string (or of `fallback`), valid while the map is unchanged: kernels
  // read their string attrs per call without copying.
  StatusOr<std::string_view> GetStringViewOr(std::string_view name, std::string_view fallback) const;
  StatusOr<bool> GetBoolOr(std::string_view name, bool fallback) const;
  // A view of the stored list, valid while the map is unchanged (kernels read it per call
  // without copying).
  StatusOr<std::span<const int64_t>> GetInts(std::string_view name) const;
  StatusOr<std::span<const double>> GetFloats(std::string_view name) const;
  StatusOr<DType> GetDType(std::string_view name) const;
  StatusOr<Shape> GetShape(std::string_view name) const;
  // Never null on success.
  StatusOr<const Graph*> GetGraph(std::string_view name) const;

  friend bool operator==(const AttrMap& a, const AttrMap& b) { return a.values_ == b.values_; }

 private:
  template <typename T>
  StatusOr<T> Get(std::string_view name, const char* type_name) const;
  std::map<std::string, AttrValue, std::less<>> values_;
};

}  // namespace lockstep
