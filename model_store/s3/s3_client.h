// An S3 client for the model store: listing (ListObjectsV2, every page) and downloads that are
// checked before they count. Requests are signed with AWS Signature Version 4 by libcurl
// (CURLOPT_AWS_SIGV4, which does all S3 needs here: GETs with an empty payload), and retried
// with exponential backoff and jitter when the network or the server fails (a connection
// refused or cut, a timeout, HTTP 5xx). A 4xx is not retried: its error names the bucket (and
// key), the HTTP status and S3's error code, and never the secret key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "model_store/s3/s3_settings.h"
#include "runtime/status.h"

namespace lockstep {

struct S3Object {
  std::string key;
  int64_t size = 0;
  std::string etag;  // without its quotes; a multipart upload's has a '-'
  friend bool operator==(const S3Object&, const S3Object&) = default;
};

struct S3Listing {
  std::vector<std::string> prefixes;  // CommonPrefixes: "base/1/", "base/2/", ...
  std::vector<S3Object> objects;
};

// One page of a ListObjectsV2 answer, for tests; `next_token` empty on the last page.
struct S3ListPage {
  S3Listing listing;
  std::string next_token;
};
StatusOr<S3ListPage> ParseListObjectsV2(std::string_view xml);

class S3Client {
 public:
  explicit S3Client(S3Settings settings);

  // Every object and common prefix under `prefix`, all pages (`page_size` keys a page); with a
  // `delimiter` ("/"), keys past it are rolled up into prefixes, as S3 does.
  StatusOr<S3Listing> List(const std::string& bucket, const std::string& prefix, std::string_view delimiter,
                           int page_size = 1000) const;

  // Downloads `object` into `path`, through `path`.download renamed into place once its size
  // is the listing's and, for an ETag that is an MD5 (a single-part upload's), its MD5 is the
  // ETag: DataLoss otherwise, and nothing at `path`. NotFound when the object is gone.
  Status Download(const std::string& bucket, const S3Object& object, const std::filesystem::path& path) const;

  const S3Settings& settings() const { return settings_; }

 private:
  // GET `url_path` (already escaped, from '/') with `query` (escaped, its parameters sorted),
  // into `body` or, with `file`, into that file; retried as the top of this file says.
  Status Get(const std::string& what, const std::string& bucket, const std::string& url_path,
             const std::string& query, std::string* body, const std::filesystem::path* file) const;
  std::string Url(const std::string& bucket, const std::string& url_path, const std::string& query) const;

  S3Settings settings_;
};

// An S3 key as it goes in a URL's path: every byte but unreserved ones and '/' percent-encoded.
std::string EscapeS3Key(std::string_view key);

}  // namespace lockstep
