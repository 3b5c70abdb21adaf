// Where an S3 model repository is and how to sign for it: s3:// URLs, and the endpoint and
// credentials read from the environment the way the AWS tools and TensorFlow Serving read them.
//
//   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY   the key pair (none: requests are sent unsigned)
//   AWS_SESSION_TOKEN                          temporary credentials' token (x-amz-security-token)
//   AWS_REGION (else AWS_DEFAULT_REGION)       the signing region; default us-east-1
//   S3_ENDPOINT                                TF Serving's: host[:port] of an S3-compatible
//                                              server (MinIO, Ceph, s3rver); requests then use
//                                              path-style addressing (host/bucket/key)
//   S3_USE_HTTPS                               "0" for http:// (default 1)
//   S3_VERIFY_SSL                              "0" not to verify the server's certificate (default 1)
//
// Without S3_ENDPOINT requests go to AWS, virtual-hosted (bucket.s3.region.amazonaws.com).
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "runtime/status.h"

namespace lockstep {

struct S3Location {
  std::string bucket;
  std::string prefix;  // the key prefix, no leading '/', ending in '/' unless empty
  std::string Url() const { return "s3://" + bucket + "/" + prefix; }
};

// Whether `path` is an s3:// URL.
bool IsS3Url(std::string_view path);

// "s3://bucket/some/prefix" -> {bucket, "some/prefix/"}. InvalidArgument for a URL without a
// bucket, or a bucket name S3 does not allow (3-63 of a-z, 0-9, '.', '-').
StatusOr<S3Location> ParseS3Url(std::string_view url);

struct S3Settings {
  std::string endpoint;  // host[:port]; empty: AWS
  bool use_https = true;
  bool verify_ssl = true;
  std::string region = "us-east-1";
  std::string access_key_id;
  std::string secret_access_key;  // never logged, never in an error
  std::string session_token;
  std::chrono::milliseconds connect_timeout{5000};
  // A transfer slower than this many bytes a second for low_speed_time is cut (and retried).
  long low_speed_bytes = 1024;
  std::chrono::seconds low_speed_time{30};
  int attempts = 4;  // tries of a request that failed on the network or with a 5xx
  std::chrono::milliseconds first_backoff{200};  // doubled each retry, with jitter
};

// The settings the environment gives (above). InvalidArgument naming the variable whose value
// is not understood (S3_USE_HTTPS=maybe).
StatusOr<S3Settings> S3SettingsFromEnvironment();

}  // namespace lockstep
