// --ssl_config_file's checks, on certificates made with the openssl CLI.
#include "server/tls_config.h"

#include <gtest/gtest.h>

#include <memory>

#include "tests/common/file_util.h"
#include "tests/common/scratch_dir.h"
#include "tests/common/test_pki.h"

namespace lockstep {
namespace {

using test::QuotedPem;
using test::SslConfigText;

class TlsConfigTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<test::ScratchDir>();  // one PKI for the suite
    pki_ = test::MakeTestPki(dir_->path());
  }
  static void TearDownTestSuite() { dir_.reset(); }

  // The error of parsing `text`, or "" when it parses.
  static std::string ErrorOf(const std::string& text) {
    const StatusOr<TlsCredentials> parsed = ParseSslConfig(text, "ssl.cfg");
    return parsed.ok() ? "" : parsed.status().message();
  }

  static inline std::unique_ptr<test::ScratchDir> dir_;
  static inline test::TestPki pki_;
};

TEST_F(TlsConfigTest, ReadsTheServerKeyCertificateAndClientCa) {
  const StatusOr<TlsCredentials> parsed = ParseSslConfig(
      SslConfigText(pki_, "custom_ca: " + QuotedPem(pki_.ca_cert) + "\nclient_verify: true\n"), "ssl.cfg");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->server_key, pki_.server_key);
  EXPECT_EQ(parsed->server_cert, pki_.server_cert);
  EXPECT_EQ(parsed->custom_ca, pki_.ca_cert);
  EXPECT_TRUE(parsed->client_verify);

  const StatusOr<TlsCredentials> server_only = ParseSslConfig(SslConfigText(pki_), "ssl.cfg");
  ASSERT_TRUE(server_only.ok()) << server_only.status().ToString();
  EXPECT_TRUE(server_only->custom_ca.empty());
  EXPECT_FALSE(server_only->client_verify);
}

TEST_F(TlsConfigTest, AChainAndSeveralCasAreAccepted) {
  const std::string chain = pki_.server_cert + pki_.ca_cert;
  const std::string cas = pki_.ca_cert + test::ReadFile(dir_->path() / "stranger_ca.pem");
  EXPECT_EQ(ErrorOf("server_key: " + QuotedPem(pki_.server_key) + " server_cert: " + QuotedPem(chain) +
                    " custom_ca: " + QuotedPem(cas)),
            "");
}

TEST_F(TlsConfigTest, MissingOrBrokenFieldsAreNamed) {
  EXPECT_EQ(ErrorOf("server_cert: " + QuotedPem(pki_.server_cert)),
            "ssl.cfg: server_key is missing (PEM text of the server's private key)");
  EXPECT_EQ(ErrorOf("server_key: " + QuotedPem(pki_.server_key)),
            "ssl.cfg: server_cert is missing (PEM text of the server's certificate)");
  EXPECT_NE(ErrorOf("server_key: \"not a key\" server_cert: " + QuotedPem(pki_.server_cert))
                .find("ssl.cfg: server_key is not a PEM private key"),
            std::string::npos);
  EXPECT_NE(ErrorOf("server_key: " + QuotedPem(pki_.server_key) + " server_cert: \"/etc/ssl/server.pem\"")
                .find("ssl.cfg: server_cert: certificate 1 does not parse: no PEM certificate found"),
            std::string::npos);
  // A certificate whose base64 is damaged.
  std::string damaged = pki_.server_cert;
  damaged[damaged.size() / 2] = '!';
  EXPECT_NE(ErrorOf("server_key: " + QuotedPem(pki_.server_key) + " server_cert: " + QuotedPem(damaged))
                .find("ssl.cfg: server_cert: certificate 1 does not parse"),
            std::string::npos);
  EXPECT_NE(ErrorOf(SslConfigText(pki_, "custom_ca: \"CA\""))
                .find("ssl.cfg: custom_ca: certificate 1 does not parse"),
            std::string::npos);
  // Upstream's field names only: a path-style field is a parse error with its position.
  EXPECT_EQ(
      ErrorOf(SslConfigText(pki_, "server_cert_file: \"x\"")),
      "ssl.cfg:3:17: not SSLConfig text (server_key, server_cert and custom_ca hold PEM text in quotes; "
      "client_verify is true or false)");
}

TEST_F(TlsConfigTest, AParseErrorQuotesNothingOfTheKey) {
  // A key pasted without quotes: protobuf's own message would quote its first token.
  const std::string key_line = pki_.server_key.substr(pki_.server_key.find('\n') + 1, 40);
  const std::string error =
      ErrorOf("server_key: " + key_line + "\nserver_cert: " + QuotedPem(pki_.server_cert));
  EXPECT_NE(error.find("ssl.cfg:1:"), std::string::npos) << error;
  for (size_t i = 0; i + 6 <= key_line.size(); ++i) {
    ASSERT_EQ(error.find(key_line.substr(i, 6)), std::string::npos) << error;
  }
}

TEST_F(TlsConfigTest, TheKeyMustBelongToTheCertificate) {
  EXPECT_EQ(
      ErrorOf("server_key: " + QuotedPem(pki_.client_key) + " server_cert: " + QuotedPem(pki_.server_cert)),
      "ssl.cfg: server_key does not belong to the first certificate of server_cert");
}

TEST_F(TlsConfigTest, AnEncryptedKeyIsRefusedWithoutPrompting) {
  const test::CommandResult encrypted = test::RunCommand(
      "openssl pkey -in '" + (dir_->path() / "server.key").string() + "' -aes256 -passout pass:secret");
  ASSERT_EQ(encrypted.exit_code, 0) << encrypted.output;
  ASSERT_NE(encrypted.output.find("ENCRYPTED PRIVATE KEY"), std::string::npos);
  EXPECT_NE(
      ErrorOf("server_key: " + QuotedPem(encrypted.output) + " server_cert: " + QuotedPem(pki_.server_cert))
          .find("ssl.cfg: server_key is not a PEM private key without a passphrase"),
      std::string::npos);
}

TEST_F(TlsConfigTest, ClientVerifyNeedsACa) {
  EXPECT_EQ(
      ErrorOf(SslConfigText(pki_, "client_verify: true")),
      "ssl.cfg: client_verify needs custom_ca: the certificates of the CAs that sign client certificates");
}

TEST_F(TlsConfigTest, ReadNamesTheFile) {
  const std::filesystem::path path = dir_->path() / "ssl.cfg";
  test::WriteFile(path, SslConfigText(pki_, "client_verify: true"));
  const StatusOr<TlsCredentials> read = ReadSslConfig(path.string());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find(path.string() + ": client_verify needs custom_ca"),
            std::string::npos);
  const StatusOr<TlsCredentials> missing = ReadSslConfig((dir_->path() / "absent.cfg").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("absent.cfg"), std::string::npos);
}

}  // namespace
}  // namespace lockstep
