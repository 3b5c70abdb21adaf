// An S3 client for the model store: listing (ListObjectsV2, every page), downloads that are
// checked before they count, and uploads S3 checks as it stores them. Requests are signed with
// AWS Signature Version 4 by libcurl (CURLOPT_AWS_SIGV4: it signs the x-amz-content-sha256
// header we send and takes its value as the payload's hash, so an upload's body is signed by its
// SHA-256, computed here from the file; checked against a hand computation of SigV4), and retried
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

  // PUTs `file` as `key`, its SHA-256 signed and its MD5 sent (Content-MD5), so that S3 refuses a
  // body changed on the way; an object already at `key` is replaced, as S3 does.
  Status Upload(const std::string& bucket, const std::string& key, const std::filesystem::path& file) const;

  // Deletes `key`; deleting a key that is not there succeeds, as S3 does.
  Status Delete(const std::string& bucket, const std::string& key) const;

  const S3Settings& settings() const { return settings_; }

 private:
  struct Request;
  // Sends `request`; retried as the top of this file says.
  Status Send(const std::string& what, const std::string& bucket, const Request& request) const;
  std::string Url(const std::string& bucket, const std::string& url_path, const std::string& query) const;

  S3Settings settings_;
};

// An S3 key as it goes in a URL's path: every byte but unreserved ones and '/' percent-encoded.
std::string EscapeS3Key(std::string_view key);

}  // namespace lockstep
