// Where a model's versions are stored, behind the source: a local directory
// <base_path>/<version>/ (source.h), or an S3 prefix s3://bucket/prefix/<version>/ (s3/), whose
// versions are listed at each poll and downloaded into a local cache before they load.
//
// An S3 version is fetched whole into <cache_dir>/<bucket>/<prefix>/<version>/: every object
// under its prefix, each checked against the listing's size and ETag (s3_client.h), into a
// temporary directory renamed into place once all are there, with the listing it was made from
// beside it (<version>.lockstep-s3-listing). A version cached from the same listing is not downloaded again; one whose objects
// changed is fetched anew. The loader then verifies the bundle's own checksums as for any
// directory: a version still being uploaded (its manifest missing or not yet matching) fails
// its load, and its fingerprint (the listing) changes when the upload completes, so the next
// poll tries it again. A key that would leave the version's directory ("../x", "/x") is refused.
// The manager prunes the cache after each poll (PruneCachedVersions): it holds what is served.
#pragma once

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "model_store/s3/s3_settings.h"
#include "runtime/status.h"

namespace lockstep {

struct StorageOptions {
  std::filesystem::path cache_dir;  // where S3 versions are downloaded to
  S3Settings s3;
  Status s3_settings_status;  // why the environment's S3 settings were refused, if they were
};

// The versions under `base_path`, ascending (source.h's rules for names).
StatusOr<std::vector<int64_t>> ListStoredVersions(const std::string& base_path, const StorageOptions& options);

// What identifies `version`'s contents cheaply: a local directory's DirFingerprint, an S3
// version's listing (keys, sizes, ETags). A failed version is retried when it changes.
std::string StoredVersionFingerprint(const std::string& base_path, int64_t version, const StorageOptions& options);

// A version ready to load: the local directory to read, and the fingerprint of what it was
// made from (StoredVersionFingerprint's, read once with the fetch).
struct FetchedVersion {
  std::filesystem::path dir;
  std::string fingerprint;
};

// The version's own directory, or its S3 objects' copy in the cache, downloaded first when not
// cached from the same listing.
StatusOr<FetchedVersion> FetchVersion(const std::string& base_path, int64_t version, const StorageOptions& options);

// Writes the version directory `dir` (made locally: a bundle, a SavedModel, an ONNX model) into
// `base_path` as `version`, or as the next version (the highest there + 1) when `version` is
// 0, the way readers expect to find it whole, and returns the version written. A version
// already there is never replaced (AlreadyExists).
//   local: copied into a hidden temporary directory beside it, then renamed into place.
//   S3:    every object uploaded first and the one that completes the version last (the
//          bundle's MANIFEST.sha256, else saved_model.pb or model.onnx), so that a reader that
//          lists it before that sees a version whose load fails and is tried again, never a
//          servable half. An upload that fails deletes what it had put, best effort.
// Two writers publishing at once under one base path may pick one version; give `version`.
StatusOr<int64_t> PublishVersion(const std::filesystem::path& dir, const std::string& base_path, int64_t version,
                                 const StorageOptions& options);

// Removes from the cache the S3 versions of `base_path` not in `keep` (the versions the manager
// loads, serves or still wants), and downloads another process left unfinished: the cache holds
// what is served, no more. Nothing for a local base path.
void PruneCachedVersions(const std::string& base_path, const std::set<int64_t>& keep, const StorageOptions& options);

}  // namespace lockstep
