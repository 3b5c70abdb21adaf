#include "model_store/s3/s3_client.h"

#include <curl/curl.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>

#include <pugixml.hpp>

#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

namespace lockstep {
namespace {

// SHA-256 of the empty payload: S3 wants x-amz-content-sha256 on every signed request.
constexpr const char* kEmptyPayloadSha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct CurlDeleter {
  void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};
struct HeadersDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

size_t AppendToString(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

size_t AppendToFile(char* data, size_t size, size_t n, void* out) {
  auto* file = static_cast<std::ofstream*>(out);
  file->write(data, static_cast<std::streamsize>(size * n));
  return *file ? size * n : 0;
}

bool Unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.' || c == '~';
}

std::string Escape(std::string_view text, bool keep_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (Unreserved(c) || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// S3's error code in an error body (<Error><Code>AccessDenied</Code>...), or empty.
std::string ErrorCodeOf(const std::string& body) {
  pugi::xml_document doc;
  if (!doc.load_buffer(body.data(), body.size())) return "";
  return doc.child("Error").child_value("Code");
}

StatusCode CodeForHttp(long status) {
  switch (status) {
    case 400: return StatusCode::kInvalidArgument;
    case 401:
    case 403: return StatusCode::kPermissionDenied;
    case 404: return StatusCode::kNotFound;
    case 416: return StatusCode::kOutOfRange;
    default: return status >= 500 ? StatusCode::kUnavailable : StatusCode::kUnknown;
  }
}

std::string Hex(const unsigned char* bytes, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (size_t i = 0; i < n; ++i) {
    hex += kHex[bytes[i] >> 4];
    hex += kHex[bytes[i] & 15];
  }
  return hex;
}

// A file's MD5 (for ETags and Content-MD5) and SHA-256 (for SigV4's payload hash), in one read.
struct FileDigests {
  std::string md5_hex;
  std::string md5_base64;
  std::string sha256_hex;
};

StatusOr<FileDigests> DigestFile(const std::filesystem::path& path, bool with_sha256) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return DataLoss("cannot read " + path.string());
  using Ctx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;
  Ctx md5(EVP_MD_CTX_new(), EVP_MD_CTX_free), sha(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(md5.get(), EVP_md5(), nullptr);
  if (with_sha256) EVP_DigestInit_ex(sha.get(), EVP_sha256(), nullptr);
  std::string buffer(size_t{1} << 20, '\0');
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto n = static_cast<size_t>(in.gcount());
    EVP_DigestUpdate(md5.get(), buffer.data(), n);
    if (with_sha256) EVP_DigestUpdate(sha.get(), buffer.data(), n);
  }
  if (in.bad()) return DataLoss("cannot read " + path.string());
  FileDigests out;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(md5.get(), digest, &length);
  out.md5_hex = Hex(digest, length);
  unsigned char base64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
  const int encoded = EVP_EncodeBlock(base64, digest, static_cast<int>(length));
  out.md5_base64.assign(reinterpret_cast<const char*>(base64), static_cast<size_t>(encoded));
  if (with_sha256) {
    EVP_DigestFinal_ex(sha.get(), digest, &length);
    out.sha256_hex = Hex(digest, length);
  }
  return out;
}

size_t ReadFromFile(char* data, size_t size, size_t n, void* in) {
  auto* file = static_cast<std::ifstream*>(in);
  file->read(data, static_cast<std::streamsize>(size * n));
  return file->bad() ? CURL_READFUNC_ABORT : static_cast<size_t>(file->gcount());
}

}  // namespace

std::string EscapeS3Key(std::string_view key) { return Escape(key, /*keep_slash=*/true); }

StatusOr<S3ListPage> ParseListObjectsV2(std::string_view xml) {
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size());
  if (!parsed) return DataLoss(std::string("the listing is not XML: ") + parsed.description());
  const pugi::xml_node result = doc.child("ListBucketResult");
  if (!result) return DataLoss("the listing is not a ListBucketResult");
  S3ListPage page;
  for (pugi::xml_node p : result.children("CommonPrefixes")) page.listing.prefixes.emplace_back(p.child_value("Prefix"));
  for (pugi::xml_node c : result.children("Contents")) {
    S3Object object;
    object.key = c.child_value("Key");
    object.size = std::strtoll(c.child_value("Size"), nullptr, 10);
    object.etag = c.child_value("ETag");
    if (object.etag.size() >= 2 && object.etag.front() == '"' && object.etag.back() == '"') {
      object.etag = object.etag.substr(1, object.etag.size() - 2);
    }
    page.listing.objects.push_back(std::move(object));
  }
  if (std::string_view(result.child_value("IsTruncated")) == "true") {
    page.next_token = result.child_value("NextContinuationToken");
    if (page.next_token.empty()) return DataLoss("the listing is truncated but has no NextContinuationToken");
  }
  return page;
}

S3Client::S3Client(S3Settings settings) : settings_(std::move(settings)) { InitCurlOnce(); }

std::string S3Client::Url(const std::string& bucket, const std::string& url_path, const std::string& query) const {
  const std::string scheme = settings_.use_https ? "https://" : "http://";
  std::string url = settings_.endpoint.empty()
                        ? scheme + bucket + ".s3." + settings_.region + ".amazonaws.com" + url_path
                        : scheme + settings_.endpoint + "/" + bucket + url_path;
  if (!query.empty()) url += "?" + query;
  return url;
}

struct S3Client::Request {
  const char* method = "GET";
  std::string url_path;  // escaped, from '/'
  std::string query;     // escaped, its parameters sorted (SigV4's canonical query string)
  std::string* body = nullptr;                      // a GET's answer, in memory
  const std::filesystem::path* download = nullptr;  // or into this file
  const std::filesystem::path* upload = nullptr;    // a PUT's body
  int64_t upload_size = 0;
  std::string payload_sha256 = kEmptyPayloadSha256;
  std::string content_md5;  // base64, for a PUT
};

Status S3Client::Send(const std::string& what, const std::string& bucket, const Request& request) const {
  const std::string url = Url(bucket, request.url_path, request.query);
  const std::filesystem::path* file = request.download;
  std::string* body = request.body;
  std::mt19937 jitter(std::random_device{}());
  Status last;
  for (int attempt = 0; attempt < settings_.attempts; ++attempt) {
    if (attempt > 0) {
      // Exponential backoff with full jitter, so that many servers retrying do not march in step.
      const auto ceiling = settings_.first_backoff * (1 << (attempt - 1));
      const auto wait = std::chrono::milliseconds(
          std::uniform_int_distribution<int64_t>(ceiling.count() / 2, ceiling.count())(jitter));
      spdlog::warn("event=s3_retry what=\"{}\" attempt={} wait_ms={} error=\"{}\"", what, attempt + 1, wait.count(),
                   last.message());
      std::this_thread::sleep_for(wait);
    }
    std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
    if (!curl) return Internal("cannot start a libcurl handle");
    std::unique_ptr<curl_slist, HeadersDeleter> headers(
        curl_slist_append(nullptr, ("x-amz-content-sha256: " + request.payload_sha256).c_str()));
    if (!settings_.session_token.empty()) {
      curl_slist_append(headers.get(), ("x-amz-security-token: " + settings_.session_token).c_str());
    }
    if (!request.content_md5.empty()) curl_slist_append(headers.get(), ("Content-MD5: " + request.content_md5).c_str());
    std::string error_body;
    std::ofstream out;
    if (file != nullptr) {
      out.open(*file, std::ios::binary | std::ios::trunc);
      if (!out) return DataLoss(what + ": cannot write " + file->string());
    }
    std::ifstream in;
    if (request.upload != nullptr) {
      in.open(*request.upload, std::ios::binary);
      if (!in) return DataLoss(what + ": cannot read " + request.upload->string());
    }
    if (body != nullptr) body->clear();
    CURL* h = curl.get();
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(settings_.connect_timeout.count()));
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, settings_.low_speed_bytes);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, static_cast<long>(settings_.low_speed_time.count()));
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, settings_.verify_ssl ? 1L : 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, settings_.verify_ssl ? 2L : 0L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (request.upload != nullptr) {
      curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(h, CURLOPT_READFUNCTION, &ReadFromFile);
      curl_easy_setopt(h, CURLOPT_READDATA, &in);
      curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.upload_size));
    } else if (std::string_view(request.method) != "GET") {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, request.method);
    }
    if (!settings_.access_key_id.empty()) {
      const std::string sigv4 = "aws:amz:" + settings_.region + ":s3";
      curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4.c_str());
      curl_easy_setopt(h, CURLOPT_USERNAME, settings_.access_key_id.c_str());
      curl_easy_setopt(h, CURLOPT_PASSWORD, settings_.secret_access_key.c_str());
    }
    // The body goes to the file only on success: an error's XML is read into error_body first.
    struct Sink {
      std::string* body;
      std::ofstream* file;
      std::string* error_body;
      CURL* curl;
    } sink{body, file != nullptr ? &out : nullptr, &error_body, h};
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t n, void* user) -> size_t {
      auto* s = static_cast<Sink*>(user);
      long status = 0;
      curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
      if (status / 100 != 2) return AppendToString(data, size, n, s->error_body);
      if (s->file != nullptr) return AppendToFile(data, size, n, s->file);
      if (s->body != nullptr) return AppendToString(data, size, n, s->body);
      return size * n;  // a PUT's or DELETE's answer: nothing we read
    });
    const CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (out.is_open()) out.close();
    if (rc != CURLE_OK) {
      if (rc == CURLE_WRITE_ERROR && file != nullptr && status / 100 == 2) {
        return DataLoss(what + ": cannot write " + file->string());
      }
      if (rc == CURLE_ABORTED_BY_CALLBACK && request.upload != nullptr) {
        return DataLoss(what + ": cannot read " + request.upload->string());
      }
      last = Status(StatusCode::kUnavailable, what + ": " + curl_easy_strerror(rc));
      continue;  // the network: try again
    }
    if (status / 100 == 2) return Status::Ok();
    const std::string code = ErrorCodeOf(error_body);
    last = Status(CodeForHttp(status), what + ": HTTP " + std::to_string(status) + (code.empty() ? "" : " " + code));
    if (status < 500) return last;  // the request's fault: the same request fails the same way
  }
  return last;
}

StatusOr<S3Listing> S3Client::List(const std::string& bucket, const std::string& prefix, std::string_view delimiter,
                                   int page_size) const {
  S3Listing all;
  std::string token;
  const std::string what = "listing s3://" + bucket + "/" + prefix;
  for (int pages = 0;; ++pages) {
    if (pages > 100000) return DataLoss(what + ": more than 100000 pages");
    // The parameters in sorted order, as SigV4's canonical query string has them.
    std::string query;
    if (!token.empty()) query += "continuation-token=" + Escape(token, false) + "&";
    if (!delimiter.empty()) query += "delimiter=" + Escape(delimiter, false) + "&";
    query += "list-type=2&max-keys=" + std::to_string(page_size) + "&prefix=" + Escape(prefix, false);
    std::string body;
    Request request;
    request.url_path = "/";
    request.query = std::move(query);
    request.body = &body;
    LS_RETURN_IF_ERROR(Send(what, bucket, request));
    LS_ASSIGN_OR_RETURN(S3ListPage page, ParseListObjectsV2(body));
    for (std::string& p : page.listing.prefixes) all.prefixes.push_back(std::move(p));
    for (S3Object& o : page.listing.objects) all.objects.push_back(std::move(o));
    if (page.next_token.empty()) return all;
    token = std::move(page.next_token);
  }
}

Status S3Client::Download(const std::string& bucket, const S3Object& object, const std::filesystem::path& path) const {
  const std::string what = "s3://" + bucket + "/" + object.key;
  std::filesystem::path partial = path;
  partial += ".download";
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  Request request;
  request.url_path = "/" + EscapeS3Key(object.key);
  request.download = &partial;
  const Status got = Send(what, bucket, request);
  if (!got.ok()) {
    std::filesystem::remove(partial, ec);
    return got;
  }
  const auto size = std::filesystem::file_size(partial, ec);
  if (ec || static_cast<int64_t>(size) != object.size) {
    std::filesystem::remove(partial, ec);
    return DataLoss(what + ": downloaded " + std::to_string(size) + " bytes, the listing said " +
                    std::to_string(object.size) + " (changed or cut while read)");
  }
  if (!object.etag.empty() && object.etag.find('-') == std::string::npos) {
    LS_ASSIGN_OR_RETURN(const FileDigests digests, DigestFile(partial, /*with_sha256=*/false));
    const std::string& md5 = digests.md5_hex;
    if (md5 != object.etag) {
      std::filesystem::remove(partial, ec);
      return DataLoss(what + ": its MD5 " + md5 + " is not its ETag " + object.etag + " (changed while read)");
    }
  }
  std::filesystem::rename(partial, path, ec);
  if (ec) return DataLoss(what + ": cannot rename into " + path.string() + ": " + ec.message());
  return Status::Ok();
}

Status S3Client::Upload(const std::string& bucket, const std::string& key, const std::filesystem::path& file) const {
  const std::string what = "uploading " + file.string() + " to s3://" + bucket + "/" + key;
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (ec) return DataLoss(what + ": " + ec.message());
  LS_ASSIGN_OR_RETURN(const FileDigests digests, DigestFile(file, /*with_sha256=*/true));
  Request request;
  request.method = "PUT";
  request.url_path = "/" + EscapeS3Key(key);
  request.upload = &file;
  request.upload_size = static_cast<int64_t>(size);
  request.payload_sha256 = digests.sha256_hex;
  request.content_md5 = digests.md5_base64;
  return Send(what, bucket, request);
}

Status S3Client::Delete(const std::string& bucket, const std::string& key) const {
  Request request;
  request.method = "DELETE";
  request.url_path = "/" + EscapeS3Key(key);
  return Send("deleting s3://" + bucket + "/" + key, bucket, request);
}

}  // namespace lockstep
