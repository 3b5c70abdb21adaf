// Admin calls against the real binary: HandleReloadConfigRequest is refused from a peer that
// is not on loopback (PERMISSION_DENIED) and allowed from loopback; with --admin_token_file it
// needs the token from everyone (UNAUTHENTICATED without it). A refused reload changes nothing.
// The Open Inference Protocol's repository load and unload are admin calls the same way, over
// gRPC and REST (Authorization: Bearer).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <google/protobuf/text_format.h>

#include <optional>
#include <string>

#include "inference/grpc_service.grpc.pb.h"
#include "tests/e2e/http_client.h"
#include "tests/e2e/server_harness.h"

namespace lockstep::e2e {
namespace {

namespace tfs = tensorflow::serving;

// An IPv4 address of this machine outside loopback, when it has one.
std::optional<std::string> NonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::nullopt;
  std::optional<std::string> found;
  for (ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
    if (std::string(text).rfind("127.", 0) != 0) found = text;
  }
  freeifaddrs(list);
  return found;
}

grpc::Status Reload(const std::string& target, const std::string& config_text,
                    const std::string& token = "") {
  auto stub = tfs::ModelService::NewStub(MakeChannel(target));
  tfs::ReloadConfigRequest request;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(config_text, request.mutable_config()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  tfs::ReloadConfigResponse response;
  return stub->HandleReloadConfigRequest(&context, request, &response);
}

class AdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteVersionModel(dir_.path() / "a", 1);
    WriteVersionModel(dir_.path() / "b", 1);
  }
  std::string Config(const std::string& model) const {
    return "model_config_list { config { name: \"" + model + "\" base_path: \"" +
           (dir_.path() / model).string() + "\" } }";
  }
  // Whether `model` answers a predict.
  bool Serves(const ServerProcess& server, const std::string& model) {
    auto stub = tfs::PredictionService::NewStub(MakeChannel(server.grpc_target()));
    grpc::ClientContext context;
    tfs::PredictResponse response;
    return stub->Predict(&context, PredictX(model), &response).ok();
  }
  ScratchDir dir_;
};

TEST_F(AdminTest, LoopbackOnlyByDefault) {
  ServerProcess server(dir_.path(), {"--model_name=a", "--model_base_path=" + (dir_.path() / "a").string()});
  if (const std::optional<std::string> address = NonLoopbackAddress()) {
    const grpc::Status remote = Reload(*address + ":" + std::to_string(server.grpc_port()), Config("b"));
    EXPECT_EQ(remote.error_code(), grpc::StatusCode::PERMISSION_DENIED) << remote.error_message();
    EXPECT_NE(remote.error_message().find("allowed from loopback only"), std::string::npos);
    EXPECT_TRUE(Serves(server, "a"));
    EXPECT_FALSE(Serves(server, "b"));
    EXPECT_NE(server.Log().find("event=admin_refused"), std::string::npos) << server.Log();
  } else {
    std::printf("no non-loopback IPv4 address here: only the loopback side is checked\n");
  }
  const grpc::Status local = Reload(server.grpc_target(), Config("b"));
  EXPECT_TRUE(local.ok()) << local.error_message();
  EXPECT_TRUE(WaitFor([&] { return Serves(server, "b"); }));
}

TEST_F(AdminTest, ATokenIsNeededFromEveryone) {
  WriteFile(dir_.path() / "token", "tok-123\n");
  ServerProcess server(dir_.path(), {"--model_name=a", "--model_base_path=" + (dir_.path() / "a").string(),
                                     "--admin_token_file=" + (dir_.path() / "token").string()});
  EXPECT_EQ(Reload(server.grpc_target(), Config("b")).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Reload(server.grpc_target(), Config("b"), "tok-12").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_FALSE(Serves(server, "b"));
  const std::string target =
      NonLoopbackAddress().value_or("127.0.0.1") + ":" + std::to_string(server.grpc_port());
  const grpc::Status ok = Reload(target, Config("b"), "tok-123");
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_TRUE(WaitFor([&] { return Serves(server, "b"); }));
}

grpc::Status Unload(const std::string& target, const std::string& model, const std::string& token = "") {
  auto stub = inference::GRPCInferenceService::NewStub(MakeChannel(target));
  inference::RepositoryModelUnloadRequest request;
  request.set_model_name(model);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  inference::RepositoryModelUnloadResponse response;
  return stub->RepositoryModelUnload(&context, request, &response);
}

TEST_F(AdminTest, RepositoryLoadAndUnloadAreAdminCalls) {
  WriteFile(dir_.path() / "token", "tok-123\n");
  ServerProcess server(dir_.path(), {"--model_name=a", "--model_base_path=" + (dir_.path() / "a").string(),
                                     "--admin_token_file=" + (dir_.path() / "token").string()});
  HttpClient http(server.rest_port());
  EXPECT_EQ(Unload(server.grpc_target(), "a").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(http.Post("/v2/repository/models/a/unload", "").status, 401);
  EXPECT_EQ(http.Request("POST", "/v2/repository/models/a/unload", "", {{"Authorization", "Bearer nope"}}).status,
            401);
  EXPECT_TRUE(Serves(server, "a"));
  EXPECT_NE(server.Log().find("event=admin_refused method=RepositoryModelUnload"), std::string::npos);

  const HttpResult unloaded =
      http.Request("POST", "/v2/repository/models/a/unload", "", {{"Authorization", "Bearer tok-123"}});
  EXPECT_EQ(unloaded.status, 200) << unloaded.body;
  EXPECT_FALSE(Serves(server, "a"));
  const HttpResult loaded =
      http.Request("POST", "/v2/repository/models/a/load", "", {{"Authorization", "Bearer tok-123"}});
  EXPECT_EQ(loaded.status, 200) << loaded.body;
  EXPECT_TRUE(Serves(server, "a"));
  const grpc::Status ok = Unload(server.grpc_target(), "a", "tok-123");
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_FALSE(Serves(server, "a"));
}

TEST_F(AdminTest, RepositoryCallsFromAfarNeedATokenPolicy) {
  ServerProcess server(dir_.path(), {"--model_name=a", "--model_base_path=" + (dir_.path() / "a").string()});
  const std::optional<std::string> address = NonLoopbackAddress();
  if (!address) GTEST_SKIP() << "no non-loopback IPv4 address here";
  const grpc::Status remote = Unload(*address + ":" + std::to_string(server.grpc_port()), "a");
  EXPECT_EQ(remote.error_code(), grpc::StatusCode::PERMISSION_DENIED) << remote.error_message();
  EXPECT_TRUE(Serves(server, "a"));
}

TEST_F(AdminTest, AnEmptyTokenFileStopsTheServer) {
  WriteFile(dir_.path() / "token", "\n");
  ServerProcess server(dir_.path(),
                       {"--model_name=a", "--model_base_path=" + (dir_.path() / "a").string(),
                        "--admin_token_file=" + (dir_.path() / "token").string()},
                       /*expect_ready=*/false);
  EXPECT_NE(server.WaitExit(), 0);
  EXPECT_NE(server.Log().find("holds no token"), std::string::npos) << server.Log();
}

}  // namespace
}  // namespace lockstep::e2e
