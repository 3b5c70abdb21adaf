#include "model_store/version_policy.h"

#include <algorithm>

namespace lockstep {

std::vector<int64_t> AspiredVersions(const VersionPolicy& policy, std::span<const int64_t> on_disk) {
  std::vector<int64_t> disk(on_disk.begin(), on_disk.end());
  std::sort(disk.begin(), disk.end());
  disk.erase(std::unique(disk.begin(), disk.end()), disk.end());
  switch (policy.kind) {
    case VersionPolicy::kLatest: {
      const size_t n = std::min<size_t>(policy.num_versions, disk.size());
      return std::vector<int64_t>(disk.end() - static_cast<std::ptrdiff_t>(n), disk.end());
    }
    case VersionPolicy::kAll:
      return disk;
    case VersionPolicy::kSpecific: {
      std::vector<int64_t> out;
      for (int64_t v : disk) {
        if (std::find(policy.versions.begin(), policy.versions.end(), v) != policy.versions.end()) {
          out.push_back(v);
        }
      }
      return out;
    }
  }
  return {};
}

}  // namespace lockstep
