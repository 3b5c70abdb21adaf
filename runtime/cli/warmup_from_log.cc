#include "runtime/cli/warmup_from_log.h"

#include <glob.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <random>
#include <set>
#include <utility>

#include "runtime/bundle/bundle.h"
#include "runtime/bundle/manifest.h"
#include "runtime/bundle/sha256.h"
#include "runtime/tfrecord.h"

namespace lockstep {
namespace {

using google::protobuf::internal::WireFormatLite;

// PredictionLog's fields (tensorflow_serving/apis/prediction_log.proto).
constexpr int kLogMetadata = 1;
constexpr int kFirstLogType = 2, kSessionRunLog = 5, kLastLogType = 7;
// LogMetadata's.
constexpr int kModelSpec = 1, kTruncated = 1002;
// ModelSpec's.
constexpr int kModelName = 1;
constexpr int64_t kMaxWarmupRecords = 1000;

// The string field `field` of a message's bytes, or empty; false when they are not wire format.
bool ReadStringField(std::string_view bytes, int field, std::string* value) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  while (const uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) == field &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::ReadBytes(&in, value)) return false;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();
}

bool ReadMetadata(std::string_view bytes, PredictionLogSummary* summary) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  while (const uint32_t tag = in.ReadTag()) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const auto type = WireFormatLite::GetTagWireType(tag);
    if (field == kModelSpec && type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      std::string spec;
      if (!WireFormatLite::ReadBytes(&in, &spec) || !ReadStringField(spec, kModelName, &summary->model)) {
        return false;
      }
    } else if (field == kTruncated && type == WireFormatLite::WIRETYPE_VARINT) {
      uint64_t value = 0;
      if (!in.ReadVarint64(&value)) return false;
      summary->truncated = value != 0;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();
}

StatusOr<std::vector<std::string>> ExpandPatterns(const std::vector<std::string>& patterns) {
  std::set<std::string> seen;
  std::vector<std::string> files;
  for (const std::string& pattern : patterns) {
    glob_t matched{};
    const int rc = glob(pattern.c_str(), GLOB_ERR, nullptr, &matched);
    std::vector<std::string> these;
    for (size_t i = 0; rc == 0 && i < matched.gl_pathc; ++i) these.emplace_back(matched.gl_pathv[i]);
    globfree(&matched);
    if (these.empty()) return NotFound("--from-log '" + pattern + "' matches no file");
    std::sort(these.begin(), these.end());
    for (std::string& f : these) {
      if (seen.insert(f).second) files.push_back(std::move(f));
    }
  }
  return files;
}

}  // namespace

StatusOr<PredictionLogSummary> SummarizePredictionLog(std::string_view record) {
  PredictionLogSummary summary;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(record.data()),
                                            static_cast<int>(record.size()));
  bool ok = true;
  while (ok) {
    const uint32_t tag = in.ReadTag();
    if (tag == 0) break;
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const bool delimited = WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    if (field == kLogMetadata && delimited) {
      std::string metadata;
      ok = WireFormatLite::ReadBytes(&in, &metadata) && ReadMetadata(metadata, &summary);
    } else {
      if (delimited && field >= kFirstLogType && field <= kLastLogType && field != kSessionRunLog) {
        summary.has_request = true;
      }
      ok = WireFormatLite::SkipField(&in, tag);
    }
  }
  if (!ok || !in.ConsumedEntireMessage()) return InvalidArgument("not a tensorflow.serving.PredictionLog");
  return summary;
}

StatusOr<WarmupCut> CutWarmupFromLogs(const WarmupCutOptions& options) {
  if (options.max_records < 1 || options.max_records > kMaxWarmupRecords) {
    return InvalidArgument("--max must be between 1 and " + std::to_string(kMaxWarmupRecords) +
                           " (TF Serving replays at most 1000 warm-up records)");
  }
  std::error_code ec;
  if (!options.overwrite && std::filesystem::exists(options.out, ec)) {
    return AlreadyExists(options.out + " exists (--overwrite replaces it)");
  }
  LS_ASSIGN_OR_RETURN(const std::vector<std::string> files, ExpandPatterns(options.patterns));
  WarmupCut cut;
  cut.files = static_cast<int64_t>(files.size());
  // The reservoir: (position among the records kept so far, record).
  std::vector<std::pair<int64_t, std::string>> kept;
  std::mt19937_64 random(options.seed);
  int64_t eligible = 0;
  for (const std::string& file : files) {
    LS_ASSIGN_OR_RETURN(TfRecordReader reader, TfRecordReader::Open(file));
    std::string record;
    for (int64_t index = 0;; ++index) {
      StatusOr<bool> more = reader.Next(&record);
      if (!more.ok()) return more.status().WithPrefix(file + ": record " + std::to_string(index));
      if (!*more) break;
      ++cut.records;
      StatusOr<PredictionLogSummary> summary = SummarizePredictionLog(record);
      if (!summary.ok()) return summary.status().WithPrefix(file + ": record " + std::to_string(index));
      if (!options.model.empty() && summary->model != options.model) {
        ++cut.other_model;
      } else if (!summary->has_request) {
        ++cut.no_request;
      } else if (summary->truncated) {
        ++cut.truncated;
      } else if (static_cast<int64_t>(kept.size()) < options.max_records) {
        kept.emplace_back(eligible++, record);
      } else {
        const int64_t slot = static_cast<int64_t>(random() % static_cast<uint64_t>(eligible + 1));
        if (slot < options.max_records) kept[static_cast<size_t>(slot)] = {eligible, record};
        ++eligible;
      }
    }
  }
  if (kept.empty()) {
    return NotFound("no record of the logs can warm a model up (" + std::to_string(cut.records) + " read: " +
                    std::to_string(cut.truncated) + " truncated, " + std::to_string(cut.no_request) +
                    " without a request, " + std::to_string(cut.other_model) + " of other models)");
  }
  std::sort(kept.begin(), kept.end());
  const std::filesystem::path out(options.out);
  if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path(), ec);
  const std::string temporary = options.out + ".tmp";
  {
    LS_ASSIGN_OR_RETURN(TfRecordWriter writer, TfRecordWriter::Create(temporary));
    for (const auto& [position, record] : kept) LS_RETURN_IF_ERROR(writer.Write(record));
    LS_RETURN_IF_ERROR(writer.Flush());
  }
  std::filesystem::rename(temporary, out, ec);
  if (ec) return DataLoss("cannot rename " + temporary + " to " + options.out + ": " + ec.message());
  cut.kept = static_cast<int64_t>(kept.size());
  StatusOr<std::string> listed = ListInBundleManifest(out);
  if (!listed.ok()) {
    // A bundle holding a file its manifest does not list would not load: take it back out.
    std::filesystem::remove(out, ec);
    return listed.status();
  }
  cut.manifest = *listed;
  return cut;
}

StatusOr<std::string> ListInBundleManifest(const std::filesystem::path& warmup_file) {
  const std::filesystem::path version = warmup_file.parent_path().parent_path();
  if (warmup_file.filename() != "tf_serving_warmup_requests" || warmup_file.parent_path().filename() != "assets.extra") {
    return std::string();
  }
  const std::filesystem::path manifest = version / kBundleManifestFile;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(manifest, ec)) return std::string();
  std::string text;
  {
    std::ifstream in(manifest, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    if (!in) return DataLoss("cannot read " + manifest.string());
    text = bytes.str();
  }
  LS_ASSIGN_OR_RETURN(std::vector<ManifestEntry> entries, ParseManifest(text));
  LS_ASSIGN_OR_RETURN(const std::string sha256, Sha256File(warmup_file));
  const std::string path = "assets.extra/tf_serving_warmup_requests";
  std::erase_if(entries, [&](const ManifestEntry& e) { return e.path == path; });
  entries.push_back({sha256, path});
  // Beside the bundle, not in it: a temporary left by a crash must not be a file the manifest
  // does not list.
  const std::string temporary =
      version.string() + ".manifest-" + std::to_string(std::random_device{}()) + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << FormatManifest(std::move(entries));
    if (!out) return DataLoss("cannot write " + temporary);
  }
  std::filesystem::rename(temporary, manifest, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(temporary, ec);
    return DataLoss("cannot rename " + temporary + " to " + manifest.string() + ": " + why);
  }
  return manifest.string();
}

}  // namespace lockstep
