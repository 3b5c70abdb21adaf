#include "server/tls_config.h"

#include <grpcpp/security/server_credentials.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "server/model_server_config.h"
#include "server/text_proto.h"
#include "tensorflow_serving/config/ssl_config.pb.h"

namespace lockstep {

namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

Bio MemoryBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// OpenSSL's reason for the last failure, and the queue cleared for the next check.
std::string OpenSslError() {
  const unsigned long code = ERR_peek_last_error();
  std::string reason = code == 0                       ? "no PEM data found"
                       : ERR_reason_error_string(code) ? ERR_reason_error_string(code)
                                                       : "unknown error";
  ERR_clear_error();
  return reason;
}

// Every certificate in `pem`, in order; an error when there is none or one does not parse.
StatusOr<std::vector<Cert>> ReadCertificates(const std::string& pem, const std::string& field) {
  std::vector<Cert> certs;
  Bio bio = MemoryBio(pem);
  for (;;) {
    Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (cert == nullptr) break;
    certs.push_back(std::move(cert));
  }
  // The loop ends at the end of the text (PEM's "no start line") or at a broken certificate.
  const unsigned long last = ERR_peek_last_error();
  const bool at_end = ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE;
  if (certs.empty() || (last != 0 && !at_end)) {
    const std::string reason = certs.empty() && at_end ? "no PEM certificate found" : OpenSslError();
    ERR_clear_error();
    return InvalidArgument(field + ": certificate " + std::to_string(certs.size() + 1) +
                           " does not parse: " + reason);
  }
  ERR_clear_error();
  return certs;
}

}  // namespace

StatusOr<TlsCredentials> ParseSslConfig(std::string_view text, std::string_view source) {
  tensorflow::serving::SSLConfig config;
  if (const Status parsed = ParseTextProto(text, source, &config); !parsed.ok()) {
    // Position only: protobuf's message may quote a token of the text, here perhaps a piece
    // of the private key, and the error goes to the log.
    const std::string& message = parsed.message();
    const size_t position_end = message.find(": ", source.size());
    return InvalidArgument(
        message.substr(0, position_end) +
        ": not SSLConfig text (server_key, server_cert and custom_ca hold PEM text in quotes; "
        "client_verify is true or false)");
  }
  const std::string at = std::string(source) + ": ";
  if (config.server_key().empty())
    return InvalidArgument(at + "server_key is missing (PEM text of the server's private key)");
  if (config.server_cert().empty())
    return InvalidArgument(at + "server_cert is missing (PEM text of the server's certificate)");

  ERR_clear_error();
  Bio key_bio = MemoryBio(config.server_key());
  // No passphrase callback: an encrypted key fails here rather than prompting on a terminal.
  Pkey key(PEM_read_bio_PrivateKey(
      key_bio.get(), nullptr, [](char*, int, int, void*) { return 0; }, nullptr));
  if (key == nullptr) {
    return InvalidArgument(at +
                           "server_key is not a PEM private key without a passphrase: " + OpenSslError());
  }
  StatusOr<std::vector<Cert>> chain = ReadCertificates(config.server_cert(), at + "server_cert");
  if (!chain.ok()) return chain.status();
  X509* leaf = chain->front().get();
  if (X509_check_private_key(leaf, key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgument(at + "server_key does not belong to the first certificate of server_cert");
  }
  if (!config.custom_ca().empty()) {
    StatusOr<std::vector<Cert>> cas = ReadCertificates(config.custom_ca(), at + "custom_ca");
    if (!cas.ok()) return cas.status();
  }
  if (config.client_verify() && config.custom_ca().empty()) {
    return InvalidArgument(
        at + "client_verify needs custom_ca: the certificates of the CAs that sign client certificates");
  }

  TlsCredentials tls;
  tls.server_key = config.server_key();
  tls.server_cert = config.server_cert();
  tls.custom_ca = config.custom_ca();
  tls.client_verify = config.client_verify();
  return tls;
}

StatusOr<TlsCredentials> ReadSslConfig(const std::string& path) {
  LS_ASSIGN_OR_RETURN(const std::string text, ReadConfigFileText(path));
  return ParseSslConfig(text, path);
}

std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(const TlsCredentials& tls) {
  grpc::SslServerCredentialsOptions options(tls.client_verify
                                                ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.force_client_auth = tls.client_verify;
  options.pem_root_certs = tls.custom_ca;
  options.pem_key_cert_pairs.push_back({tls.server_key, tls.server_cert});
  return grpc::SslServerCredentials(options);
}

}  // namespace lockstep
