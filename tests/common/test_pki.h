// Certificates for the TLS tests, made with the openssl CLI at test time (no key material in
// the repository): a CA, a server certificate for localhost and 127.0.0.1, a client
// certificate from the same CA, and a client certificate from an unrelated CA. EC P-256 keys,
// valid for two days.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/common/file_util.h"
#include "tests/common/run_command.h"

namespace lockstep::test {

struct TestPki {
  std::string ca_cert;
  std::string server_key, server_cert;
  std::string client_key, client_cert;
  std::string stranger_key, stranger_cert;  // signed by another CA
  std::filesystem::path dir;                // where the PEM files are
};

// `pem` as a text-format string literal.
inline std::string QuotedPem(const std::string& pem) {
  std::string out = "\"";
  for (char c : pem) out += c == '\n' ? std::string("\\n") : std::string(1, c);
  return out + "\"";
}

// An SSLConfig text with `pki`'s server key and certificate, then `extra` fields.
inline std::string SslConfigText(const TestPki& pki, const std::string& extra = "") {
  return "server_key: " + QuotedPem(pki.server_key) + "\nserver_cert: " + QuotedPem(pki.server_cert) + "\n" +
         extra;
}

// Writes the certificates under `dir`; fails the test if openssl does.
inline TestPki MakeTestPki(const std::filesystem::path& dir) {
  WriteFile(dir / "make-pki.sh", R"(set -e
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
ca() { key "$1.key"; openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 2 -subj "/CN=$2"; }
leaf() {  # name, CA, CN, extensions
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$3"
  printf '%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 2 -extfile "$1.ext" -out "$1.pem"
}
ca ca "Lockstep test CA"
ca stranger_ca "Some other CA"
leaf server ca localhost "subjectAltName=DNS:localhost,IP:127.0.0.1"
leaf client ca "test client" "extendedKeyUsage=clientAuth"
leaf stranger stranger_ca stranger "extendedKeyUsage=clientAuth"
)");
  const CommandResult made = RunCommand("cd '" + dir.string() + "' && bash make-pki.sh");
  EXPECT_EQ(made.exit_code, 0) << "openssl failed:\n" << made.output;
  TestPki pki;
  pki.dir = dir;
  pki.ca_cert = ReadFile(dir / "ca.pem");
  pki.server_key = ReadFile(dir / "server.key");
  pki.server_cert = ReadFile(dir / "server.pem");
  pki.client_key = ReadFile(dir / "client.key");
  pki.client_cert = ReadFile(dir / "client.pem");
  pki.stranger_key = ReadFile(dir / "stranger.key");
  pki.stranger_cert = ReadFile(dir / "stranger.pem");
  return pki;
}

}  // namespace lockstep::test
