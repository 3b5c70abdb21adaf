#include "model_store/s3/s3_settings.h"

#include <cstdlib>

namespace lockstep {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

Status ReadSwitch(const char* name, bool* value) {
  const std::string text = Env(name);
  if (text.empty()) return Status::Ok();
  if (text == "1" || text == "true") {
    *value = true;
  } else if (text == "0" || text == "false") {
    *value = false;
  } else {
    return InvalidArgument(std::string(name) + "='" + text + "': expected 0 or 1");
  }
  return Status::Ok();
}

bool ValidBucket(std::string_view bucket) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  for (char c : bucket) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
    if (!ok) return false;
  }
  return bucket.front() != '.' && bucket.front() != '-' && bucket.back() != '.' && bucket.back() != '-';
}

}  // namespace

bool IsS3Url(std::string_view path) { return path.rfind("s3://", 0) == 0; }

StatusOr<S3Location> ParseS3Url(std::string_view url) {
  if (!IsS3Url(url)) return InvalidArgument("'" + std::string(url) + "' is not an s3:// URL");
  std::string_view rest = url.substr(5);
  const size_t slash = rest.find('/');
  S3Location location;
  location.bucket = std::string(rest.substr(0, slash));
  if (!ValidBucket(location.bucket)) {
    return InvalidArgument("'" + std::string(url) + "': '" + location.bucket +
                           "' is not an S3 bucket name (3 to 63 of a-z, 0-9, '.' and '-')");
  }
  if (slash != std::string_view::npos) {
    std::string_view prefix = rest.substr(slash + 1);
    while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
    if (!prefix.empty()) location.prefix = std::string(prefix) + "/";
  }
  return location;
}

StatusOr<S3Settings> S3SettingsFromEnvironment() {
  S3Settings settings;
  settings.endpoint = Env("S3_ENDPOINT");
  // TF Serving's S3_ENDPOINT is host[:port]; a scheme given anyway decides https.
  if (settings.endpoint.rfind("http://", 0) == 0) {
    settings.endpoint = settings.endpoint.substr(7);
    settings.use_https = false;
  } else if (settings.endpoint.rfind("https://", 0) == 0) {
    settings.endpoint = settings.endpoint.substr(8);
  }
  while (!settings.endpoint.empty() && settings.endpoint.back() == '/') settings.endpoint.pop_back();
  LS_RETURN_IF_ERROR(ReadSwitch("S3_USE_HTTPS", &settings.use_https));
  LS_RETURN_IF_ERROR(ReadSwitch("S3_VERIFY_SSL", &settings.verify_ssl));
  std::string region = Env("AWS_REGION");
  if (region.empty()) region = Env("AWS_DEFAULT_REGION");
  if (!region.empty()) settings.region = region;
  settings.access_key_id = Env("AWS_ACCESS_KEY_ID");
  settings.secret_access_key = Env("AWS_SECRET_ACCESS_KEY");
  settings.session_token = Env("AWS_SESSION_TOKEN");
  if (settings.access_key_id.empty() != settings.secret_access_key.empty()) {
    return InvalidArgument("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together");
  }
  return settings;
}

}  // namespace lockstep
