#include "runtime/bundle/manifest.h"

#include <algorithm>
#include <set>

#include "runtime/bundle/sha256.h"

namespace lockstep {

namespace {

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// For messages: a hostile line must not flood a log or smuggle control characters into it.
std::string Printable(std::string_view s) {
  constexpr size_t kMax = 80;
  std::string out;
  for (char c : s.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 0xf]);
    } else {
      out.push_back(c);
    }
  }
  if (s.size() > kMax) out += "...";
  return out;
}

}  // namespace

Status CheckBundlePath(std::string_view path) {
  std::string shown = "'";
  shown.append(Printable(path)).append("'");
  if (path.empty()) return InvalidArgument("empty path");
  if (path.size() > kMaxBundlePathLength) {
    return InvalidArgument("path " + shown + " is longer than " + std::to_string(kMaxBundlePathLength) + " bytes");
  }
  if (path.front() == '/') return InvalidArgument("path " + shown + " is absolute");
  for (char c : path) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '\\') {
      return InvalidArgument("path " + shown + " contains a control character or backslash");
    }
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view part = path.substr(start, slash - start);
    if (part.empty()) return InvalidArgument("path " + shown + " has an empty component");
    if (part == "..") return InvalidArgument("path " + shown + " contains '..'");
    if (part == ".") return InvalidArgument("path " + shown + " contains '.'");
    start = slash + 1;
  }
  return Status::Ok();
}

std::string FormatManifest(std::vector<ManifestEntry> entries) {
  std::sort(entries.begin(), entries.end(),
            [](const ManifestEntry& a, const ManifestEntry& b) { return a.path < b.path; });
  std::string out;
  for (const ManifestEntry& e : entries) {
    out += e.sha256;
    out += "  ";
    out += e.path;
    out += '\n';
  }
  return out;
}

StatusOr<std::vector<ManifestEntry>> ParseManifest(std::string_view text) {
  if (text.size() > kMaxManifestBytes) {
    return DataLoss("manifest is " + std::to_string(text.size()) + " bytes, more than the limit of " +
                    std::to_string(kMaxManifestBytes));
  }
  std::vector<ManifestEntry> entries;
  std::set<std::string, std::less<>> seen;
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    ++line_no;
    const std::string where = "line " + std::to_string(line_no);
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) return DataLoss(where + " does not end with a newline");
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    // "<64 hex><space><space><path>": sha256sum's binary-mode marker ("<hex> *<path>") and
    // its backslash escaping are both refused; the writer never produces them.
    if (line.size() < kSha256HexLength + 3) {
      return DataLoss(where + " is malformed: expected '<64 hex digits>  <path>', got '" + Printable(line) + "'");
    }
    std::string_view hex = line.substr(0, kSha256HexLength);
    if (!std::all_of(hex.begin(), hex.end(), IsLowerHex)) {
      return DataLoss(where + " is malformed: the checksum is not 64 lowercase hex digits: '" + Printable(line) + "'");
    }
    if (line.substr(kSha256HexLength, 2) != "  ") {
      return DataLoss(where + " is malformed: expected two spaces after the checksum: '" + Printable(line) + "'");
    }
    std::string_view path = line.substr(kSha256HexLength + 2);
    Status ok = CheckBundlePath(path);
    if (!ok.ok()) return DataLoss(where + " is malformed: " + ok.message());
    if (!seen.emplace(path).second) return DataLoss(where + " lists '" + Printable(path) + "' a second time");
    entries.push_back({std::string(hex), std::string(path)});
  }
  return entries;
}

}  // namespace lockstep
