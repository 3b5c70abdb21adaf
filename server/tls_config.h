// --ssl_config_file: TensorFlow Serving's SSLConfig in text format. Its fields hold PEM text,
// not paths, as upstream's do:
//
//   server_key: "-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----\n"
//   server_cert: "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n"
//   custom_ca: "-----BEGIN CERTIFICATE-----\n..."   # CAs that sign client certificates
//   client_verify: true                             # mutual TLS
//
// Upstream secures gRPC only; Lockstep serves both gRPC and REST over TLS with it, so that no
// port of a TLS server speaks plaintext.
//
// Everything is checked at start, so that a bad file stops the server with an error that
// names the file and the field instead of failing each client's handshake: the key and every
// certificate parse, the key belongs to the certificate, and client_verify has a CA to verify
// against. An unencrypted key is needed (there is no passphrase to give).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "runtime/status.h"

namespace grpc {
class ServerCredentials;
}  // namespace grpc

namespace lockstep {

struct TlsCredentials {
  std::string server_key;   // PEM private key
  std::string server_cert;  // PEM certificate chain, the server's first
  std::string custom_ca;    // PEM certificates; empty: no client CA
  bool client_verify = false;
};

// Parses and checks `text`; `source` names it in errors. Validity dates are not checked:
// clients do, and an operator may be installing a certificate that starts tomorrow.
StatusOr<TlsCredentials> ParseSslConfig(std::string_view text, std::string_view source);

// Reads `path` and parses it.
StatusOr<TlsCredentials> ReadSslConfig(const std::string& path);

// gRPC's server credentials for `tls`: TLS 1.2 or later, and with client_verify a client
// certificate signed by custom_ca is required.
std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(const TlsCredentials& tls);

}  // namespace lockstep
