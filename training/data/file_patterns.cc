#include "training/data/file_patterns.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>

namespace lockstep::training {

StatusOr<std::vector<std::string>> ExpandFilePatterns(const std::vector<std::string>& entries) {
  std::vector<std::string> files;
  for (const std::string& entry : entries) {
    std::error_code ec;
    if (entry.find_first_of("*?[") == std::string::npos || std::filesystem::is_regular_file(entry, ec)) {
      files.push_back(entry);
      continue;
    }
    glob_t matches{};
    const int rc = glob(entry.c_str(), GLOB_ERR, nullptr, &matches);
    const std::unique_ptr<glob_t, decltype(&globfree)> release(&matches, &globfree);
    if (rc == GLOB_NOMATCH) return NotFound("'" + entry + "' matches no file");
    if (rc != 0) return NotFound("'" + entry + "': cannot list the directories it names");
    std::vector<std::string> found;
    for (size_t i = 0; i < matches.gl_pathc; ++i) {
      std::error_code ec;
      if (!std::filesystem::is_directory(matches.gl_pathv[i], ec)) found.emplace_back(matches.gl_pathv[i]);
    }
    if (found.empty()) return NotFound("'" + entry + "' matches only directories");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  std::set<std::string> seen;
  for (const std::string& f : files) {
    if (!seen.insert(f).second) return InvalidArgument("'" + f + "' is listed twice");
  }
  return files;
}

}  // namespace lockstep::training
