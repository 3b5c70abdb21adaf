// model-server with --ssl_config_file: gRPC and REST over TLS, mutual TLS with client_verify,
// and a bad SSLConfig stopping the server at start. Certificates are made with the openssl CLI
// for each test (tests/common/test_pki.h).
#include <grpcpp/security/credentials.h>

#include "tests/common/test_pki.h"
#include "tests/e2e/rest_test_util.h"

namespace lockstep::e2e {
namespace {

using test::MakeTestPki;
using test::QuotedPem;
using test::SslConfigText;
using test::TestPki;

constexpr char kTlsPredict[] = R"({"instances": [1.0, 2.0, 5.0]})";
constexpr char kPredicted[] = R"({"predictions": [2.5, 3.0, 4.5]})";

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_ = MakeTestPki(dir_.path());
    WriteHalfPlusTwo(dir_.path() / "half", 1);
  }

  // model-server flags serving half_plus_two with an SSLConfig of the server's key and
  // certificate and `extra` fields.
  std::vector<std::string> Flags(const std::string& extra = "") {
    const fs::path config = dir_.path() / "ssl.cfg";
    WriteFile(config, SslConfigText(pki_, extra));
    return {"--model_name=half", "--model_base_path=" + (dir_.path() / "half").string(),
            "--ssl_config_file=" + config.string()};
  }

  // An HTTPS client trusting the test CA, with a client certificate when given one.
  HttpClient Https(int port, const std::string& cert = "", const std::string& key = "") {
    TlsClientOptions tls;
    tls.ca_pem = pki_.ca_cert;
    tls.cert_pem = cert;
    tls.key_pem = key;
    return HttpClient(port, tls);
  }

  // gRPC Predict over TLS (the server checked as "localhost" by the test CA), with a client
  // certificate when given one.
  grpc::Status GrpcPredict(const ServerProcess& server, const std::string& cert = "",
                           const std::string& key = "") {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = pki_.ca_cert;
    ssl.pem_cert_chain = cert;
    ssl.pem_private_key = key;
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    return Predict(grpc::CreateCustomChannel(server.grpc_target(), grpc::SslCredentials(ssl), args));
  }

  static grpc::Status Predict(const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = tensorflow::serving::PredictionService::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    tensorflow::serving::PredictResponse response;
    grpc::Status status = stub->Predict(&context, PredictX("half", 2.0f), &response);
    if (status.ok() && response.outputs().at("y").float_val(0) != 3.0f) {
      return grpc::Status(grpc::StatusCode::INTERNAL, "wrong answer: " + response.DebugString());
    }
    return status;
  }

  ScratchDir dir_;
  TestPki pki_;
};

TEST_F(TlsTest, RestAndGrpcAnswerOverTlsAndRefusePlaintext) {
  ServerProcess server(dir_.path(), Flags());

  HttpClient https = Https(server.rest_port());
  for (int i = 0; i < 3; ++i) {  // on one kept-alive connection
    const HttpResult r = https.Post("/v1/models/half:predict", kTlsPredict);
    EXPECT_EQ(r.status, 200) << r.error;
    EXPECT_EQ(r.body, kPredicted);
  }
  // The server's last answer on a connection ends its TLS session; the next one opens anew.
  const HttpResult last =
      https.Request("POST", "/v1/models/half:predict", kTlsPredict, {{"Connection", "close"}});
  EXPECT_EQ(last.status, 200) << last.error;
  EXPECT_EQ(last.body, kPredicted);
  EXPECT_EQ(HeaderOf(last, "connection"), "close");
  EXPECT_TRUE(last.tls_closed_cleanly);
  EXPECT_EQ(https.Get("/v2/health/ready").status, 200);
  EXPECT_EQ(https.Get("/v1/models/half").status, 200);
  // The Open Inference Protocol on the same HTTPS port, binary extension included.
  const std::string header =
      R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "parameters": {"binary_data_size": 4}}]})";
  const float x = 3.0f;
  const HttpResult v2 = https.Request("POST", "/v2/models/half/infer",
                                      header + std::string(reinterpret_cast<const char*>(&x), sizeof(x)),
                                      {{"Inference-Header-Content-Length", std::to_string(header.size())}});
  EXPECT_EQ(v2.status, 200) << v2.error << v2.body;
  EXPECT_NE(v2.body.find(R"("data":[3.5])"), std::string::npos) << v2.body;

  // Plain HTTP on the HTTPS port gets no answer, and the server goes on.
  HttpClient plain(server.rest_port());
  const HttpResult refused = plain.Post("/v1/models/half:predict", kTlsPredict);
  EXPECT_EQ(refused.status, 0) << refused.body;

  // A client that does not trust the server's CA stops at the handshake.
  TlsClientOptions stranger_trust;
  stranger_trust.ca_pem = test::ReadFile(pki_.dir / "stranger_ca.pem");
  const HttpResult untrusted = HttpClient(server.rest_port(), stranger_trust).Get("/v2/health/ready");
  EXPECT_EQ(untrusted.status, 0);
  EXPECT_NE(untrusted.error.find("certificate verify failed"), std::string::npos) << untrusted.error;

  const grpc::Status secure = GrpcPredict(server);
  EXPECT_TRUE(secure.ok()) << secure.error_message();
  const grpc::Status insecure = Predict(MakeChannel(server.grpc_target()));
  EXPECT_EQ(insecure.error_code(), grpc::StatusCode::UNAVAILABLE) << insecure.error_message();

  EXPECT_EQ(https.Post("/v1/models/half:predict", kTlsPredict).body, kPredicted);
  EXPECT_EQ(server.Stop(), 0);
}

TEST_F(TlsTest, ClientVerifyAdmitsOnlyClientsWithACertificateFromTheCa) {
  ServerProcess server(dir_.path(),
                       Flags("custom_ca: " + QuotedPem(pki_.ca_cert) + "\nclient_verify: true\n"));

  const HttpResult admitted =
      Https(server.rest_port(), pki_.client_cert, pki_.client_key).Post("/v1/models/half:predict", kTlsPredict);
  EXPECT_EQ(admitted.status, 200) << admitted.error;
  EXPECT_EQ(admitted.body, kPredicted);
  EXPECT_EQ(Https(server.rest_port()).Get("/v2/health/ready").status, 0) << "no client certificate";
  EXPECT_EQ(Https(server.rest_port(), pki_.stranger_cert, pki_.stranger_key).Get("/v2/health/ready").status,
            0)
      << "a certificate from another CA";

  const grpc::Status with_cert = GrpcPredict(server, pki_.client_cert, pki_.client_key);
  EXPECT_TRUE(with_cert.ok()) << with_cert.error_message();
  EXPECT_FALSE(GrpcPredict(server).ok()) << "no client certificate";
  EXPECT_FALSE(GrpcPredict(server, pki_.stranger_cert, pki_.stranger_key).ok())
      << "a certificate from another CA";

  EXPECT_EQ(Https(server.rest_port(), pki_.client_cert, pki_.client_key).Get("/v2/health/live").status, 200);

  // A client that resumes its TLS session (as curl and proxies do) is admitted again: OpenSSL
  // refuses resumption under client verification unless the server names a session context.
  const std::string s_client = "openssl s_client -connect 127.0.0.1:" + std::to_string(server.rest_port()) +
                               " -tls1_2 -CAfile ca.pem -cert client.pem -key client.key < /dev/null";
  const test::CommandResult first =
      test::RunCommand("cd '" + pki_.dir.string() + "' && " + s_client + " -sess_out session.pem");
  EXPECT_NE(first.output.find("New, TLSv1.2"), std::string::npos) << first.output;
  const test::CommandResult resumed =
      test::RunCommand("cd '" + pki_.dir.string() + "' && " + s_client + " -sess_in session.pem");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("Reused, TLSv1.2"), std::string::npos) << resumed.output;
  EXPECT_EQ(server.Stop(), 0);
}

// A client that connects and never starts the handshake is closed after the REST timeout.
TEST_F(TlsTest, ASilentClientIsClosedAfterTheTimeout) {
  std::vector<std::string> flags = Flags();
  flags.push_back("--rest_api_timeout_in_ms=500");
  ServerProcess server(dir_.path(), flags);
  RawConnection silent(server.rest_port());
  ASSERT_TRUE(silent.connected());
  EXPECT_TRUE(silent.WaitClosed(std::chrono::seconds(5)));
  HttpClient https = Https(server.rest_port());
  EXPECT_EQ(https.Post("/v1/models/half:predict", kTlsPredict).body, kPredicted);
}

// SIGTERM's drain does not wait for HTTPS connections that have no request: an idle keep-alive
// one, and one whose handshake has not begun (the timeout, 30 s, is far off).
TEST_F(TlsTest, TheDrainClosesIdleAndHandshakingConnectionsAtOnce) {
  ServerProcess server(dir_.path(), Flags());
  HttpClient idle = Https(server.rest_port());
  ASSERT_EQ(idle.Post("/v1/models/half:predict", kTlsPredict).status, 200);
  RawConnection silent(server.rest_port());
  ASSERT_TRUE(silent.connected());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // accepted, handshake pending

  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  EXPECT_EQ(server.WaitExit(std::chrono::seconds(25)), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(server.Log().find("http_connections_cut=0"), std::string::npos) << server.Log();
}

TEST_F(TlsTest, ABadSslConfigStopsTheServerNamingTheFileAndField) {
  const fs::path config = dir_.path() / "ssl.cfg";
  WriteFile(config,
            "server_key: " + QuotedPem(pki_.client_key) + "\nserver_cert: " + QuotedPem(pki_.server_cert));
  ServerProcess mismatched(dir_.path(),
                           {"--model_name=half", "--model_base_path=" + (dir_.path() / "half").string(),
                            "--ssl_config_file=" + config.string()},
                           /*expect_ready=*/false);
  EXPECT_NE(mismatched.WaitExit(), 0);
  EXPECT_NE(mismatched.Log().find(config.string() +
                                  ": server_key does not belong to the first certificate of server_cert"),
            std::string::npos)
      << mismatched.Log();
  EXPECT_EQ(mismatched.Log().find("event=version_available"), std::string::npos)
      << "it stops before loading models";

  ServerProcess missing(dir_.path(),
                        {"--model_name=half", "--model_base_path=" + (dir_.path() / "half").string(),
                         "--ssl_config_file=" + (dir_.path() / "absent.cfg").string()},
                        /*expect_ready=*/false);
  EXPECT_NE(missing.WaitExit(), 0);
  EXPECT_NE(missing.Log().find("absent.cfg"), std::string::npos) << missing.Log();
}

}  // namespace
}  // namespace lockstep::e2e
