#include "runtime/attr.h"

namespace lockstep {

template <typename T>
StatusOr<T> AttrMap::Get(std::string_view name, const char* type_name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return InvalidArgument("missing attr '" + std::string(name) + "'");
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  return InvalidArgument("attr '" + std::string(name) + "' is not of type " + type_name);
}

StatusOr<int64_t> AttrMap::GetInt(std::string_view name) const { return Get<int64_t>(name, "int"); }

StatusOr<int64_t> AttrMap::GetIntOr(std::string_view name, int64_t fallback) const {
  return Has(name) ? GetInt(name) : StatusOr<int64_t>(fallback);
}

StatusOr<double> AttrMap::GetFloatOr(std::string_view name, double fallback) const {
  return Has(name) ? Get<double>(name, "float") : StatusOr<double>(fallback);
}

StatusOr<std::string> AttrMap::GetString(std::string_view name) const {
  return Get<std::string>(name, "string");
}

StatusOr<std::string> AttrMap::GetStringOr(std::string_view name, std::string fallback) const {
  return Has(name) ? GetString(name) : StatusOr<std::string>(std::move(fallback));
}

StatusOr<std::string_view> AttrMap::GetStringViewOr(std::string_view name, std::string_view fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  if (const auto* v = std::get_if<std::string>(&it->second)) return std::string_view(*v);
  return InvalidArgument("attr '" + std::string(name) + "' is not of type string");
}

StatusOr<bool> AttrMap::GetBoolOr(std::string_view name, bool fallback) const {
  return Has(name) ? Get<bool>(name, "bool") : StatusOr<bool>(fallback);
}

StatusOr<std::span<const int64_t>> AttrMap::GetInts(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return InvalidArgument("missing attr '" + std::string(name) + "'");
  if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return std::span<const int64_t>(*v);
  return InvalidArgument("attr '" + std::string(name) + "' is not of type list of ints");
}

StatusOr<std::span<const double>> AttrMap::GetFloats(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return InvalidArgument("missing attr '" + std::string(name) + "'");
  if (const auto* v = std::get_if<std::vector<double>>(&it->second)) return std::span<const double>(*v);
  return InvalidArgument("attr '" + std::string(name) + "' is not of type list of floats");
}

StatusOr<DType> AttrMap::GetDType(std::string_view name) const { return Get<DType>(name, "dtype"); }

StatusOr<Shape> AttrMap::GetShape(std::string_view name) const { return Get<Shape>(name, "shape"); }

StatusOr<const Graph*> AttrMap::GetGraph(std::string_view name) const {
  LS_ASSIGN_OR_RETURN(SubgraphAttr graph, Get<SubgraphAttr>(name, "graph"));
  if (graph == nullptr) return InvalidArgument("attr '" + std::string(name) + "' holds no graph");
  return graph.get();
}

}  // namespace lockstep
