// MANIFEST.sha256: one line per file of the bundle, "<64 lowercase hex>  <relative path>\n",
// exactly what `sha256sum` prints in text mode, so an operator can check a bundle with
// `cd <bundle> && sha256sum -c MANIFEST.sha256`.
//
// The parser is strict, because the manifest is the first thing a reader trusts: any line that
// is not exactly in that form, any path that could leave the bundle directory, and any
// duplicate are refused, and its size is bounded before it is read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/bundle/limits.h"
#include "runtime/status.h"

namespace lockstep {

struct ManifestEntry {
  std::string sha256;  // 64 lowercase hex digits
  std::string path;    // relative, '/'-separated
  friend bool operator==(const ManifestEntry&, const ManifestEntry&) = default;
};

// Whether `path` may name a file inside a bundle: relative, '/'-separated, no empty, "." or
// ".." component, and no byte that sha256sum would escape (newline, backslash) or that a
// terminal would render misleadingly (control characters). The message says why not.
Status CheckBundlePath(std::string_view path);

// The manifest text for `entries`, sorted by path.
std::string FormatManifest(std::vector<ManifestEntry> entries);

// Parses manifest text. Errors are DataLoss and name the line.
StatusOr<std::vector<ManifestEntry>> ParseManifest(std::string_view text);

}  // namespace lockstep
