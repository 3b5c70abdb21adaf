#include "training/data/labelled_table.h"

#include <algorithm>
#include <map>
#include <string>

namespace lockstep::training {

int32_t LabelledTable::num_classes() const {
  int32_t n = 0;
  for (int32_t label : labels) n = std::max(n, label + 1);
  return std::max(n, static_cast<int32_t>(class_names.size()));
}

std::string LabelledTable::Where(int64_t row) const {
  if (static_cast<size_t>(row) >= origins.size()) return "row " + std::to_string(row + 1);
  const RowOrigin& o = origins[static_cast<size_t>(row)];
  const std::string& file = source_files[static_cast<size_t>(o.file)];
  return record_offsets ? file + ": record at offset " + std::to_string(o.position)
                        : file + ":" + std::to_string(o.position);
}

void LabelledTable::Append(const LabelledTable& other) {
  features.insert(features.end(), other.features.begin(), other.features.end());
  labels.insert(labels.end(), other.labels.begin(), other.labels.end());
  targets.insert(targets.end(), other.targets.begin(), other.targets.end());
  const auto file_base = static_cast<int32_t>(source_files.size());
  source_files.insert(source_files.end(), other.source_files.begin(), other.source_files.end());
  for (const RowOrigin& o : other.origins) origins.push_back({o.file + file_base, o.position});
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

Status MapClassesOnto(const LabelledTable& reference, LabelledTable& table) {
  if (reference.class_names.empty() != table.class_names.empty()) {
    return InvalidArgument(std::string("its labels are ") + (table.class_names.empty() ? "integer ids" : "names") +
                           ", but the training data's are " +
                           (reference.class_names.empty() ? "integer ids" : "names"));
  }
  if (table.class_names.empty()) return Status::Ok();
  std::map<std::string, int32_t> ids;
  for (size_t i = 0; i < reference.class_names.size(); ++i) ids.emplace(reference.class_names[i], static_cast<int32_t>(i));
  std::vector<int32_t> remap;
  for (const std::string& name : table.class_names) {
    auto it = ids.find(name);
    if (it == ids.end()) return InvalidArgument("class '" + name + "' does not occur in the training data");
    remap.push_back(it->second);
  }
  for (int32_t& label : table.labels) label = remap[static_cast<size_t>(label)];
  table.class_names = reference.class_names;
  return Status::Ok();
}

}  // namespace lockstep::training
