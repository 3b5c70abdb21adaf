#include "runtime/attr.h"

namespace lockstep {

template <typename T>
StatusOr<T> AttrMap::Get(const std::string& name, const char* type_name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return InvalidArgument("missing attr '" + name + "'");
  if (const T* v = std::get_if<T>(&it->second)) return *v;
  return InvalidArgument("attr '" + name + "' is not of type " + type_name);
}

StatusOr<int64_t> AttrMap::GetInt(const std::string& name) const { return Get<int64_t>(name, "int"); }

StatusOr<int64_t> AttrMap::GetIntOr(const std::string& name, int64_t fallback) const {
  return Has(name) ? GetInt(name) : StatusOr<int64_t>(fallback);
}

StatusOr<double> AttrMap::GetFloatOr(const std::string& name, double fallback) const {
  return Has(name) ? Get<double>(name, "float") : StatusOr<double>(fallback);
}

StatusOr<std::string> AttrMap::GetString(const std::string& name) const {
  return Get<std::string>(name, "string");
}

StatusOr<std::string> AttrMap::GetStringOr(const std::string& name, std::string fallback) const {
  return Has(name) ? GetString(name) : StatusOr<std::string>(std::move(fallback));
}

StatusOr<std::string_view> AttrMap::GetStringViewOr(const std::string& name, std::string_view fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  if (const auto* v = std::get_if<std::string>(&it->second)) return std::string_view(*v);
  return InvalidArgument("attr '" + name + "' is not of type string");
}

StatusOr<bool> AttrMap::GetBoolOr(const std::string& name, bool fallback) const {
  return Has(name) ? Get<bool>(name, "bool") : StatusOr<bool>(fallback);
}

StatusOr<std::span<const int64_t>> AttrMap::GetInts(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return InvalidArgument("missing attr '" + name + "'");
  if (const auto* v = std::get_if<std::vector<int64_t>>(&it->second)) return std::span<const int64_t>(*v);
  return InvalidArgument("attr '" + name + "' is not of type list of ints");
}

StatusOr<DType> AttrMap::GetDType(const std::string& name) const { return Get<DType>(name, "dtype"); }

StatusOr<Shape> AttrMap::GetShape(const std::string& name) const { return Get<Shape>(name, "shape"); }

}  // namespace lockstep
