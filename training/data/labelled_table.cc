#include "training/data/labelled_table.h"

#include <algorithm>
#include <map>

namespace lockstep::training {

int32_t LabelledTable::num_classes() const {
  int32_t n = 0;
  for (int32_t label : labels) n = std::max(n, label + 1);
  return std::max(n, static_cast<int32_t>(class_names.size()));
}

void AssignClassNames(const std::vector<std::string>& names, LabelledTable& table) {
  std::map<std::string, int32_t> ids;
  for (const std::string& name : names) ids.emplace(name, 0);
  table.class_names.clear();
  int32_t next = 0;
  for (auto& [name, id] : ids) {
    id = next++;
    table.class_names.push_back(name);
  }
  table.labels.resize(names.size());
  for (size_t r = 0; r < names.size(); ++r) table.labels[r] = ids.at(names[r]);
}

}  // namespace lockstep::training
