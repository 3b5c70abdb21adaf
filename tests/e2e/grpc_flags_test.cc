// gRPC's transport flags end to end: --grpc_channel_arguments (an operator's limits reach
// gRPC's server) and --grpc_socket_path (the API on a Unix socket too).
#include <gtest/gtest.h>

#include "tests/e2e/grpc_test_util.h"

namespace lockstep::e2e {
namespace {

TEST(GrpcFlagsTest, ChannelArgumentsLowerTheMessageLimit) {
  ScratchDir dir;
  WriteHalfPlusTwo(dir.path() / "half", 1);
  ServerProcess server(dir.path(), {"--model_name=half", "--model_base_path=" + (dir.path() / "half").string(),
                                    "--grpc_channel_arguments=grpc.max_receive_message_length=2048, "
                                    "grpc.max_concurrent_streams=8"});
  EXPECT_NE(server.Log().find("event=grpc_channel_argument key=grpc.max_receive_message_length value=2048"),
            std::string::npos)
      << server.Log();
  auto stub = tfs::PredictionService::NewStub(MakeChannel(server.grpc_target()));

  auto predict = [&](size_t n) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    tfs::PredictResponse response;
    const grpc::Status status = stub->Predict(&context, PredictX("half", std::vector<float>(n, 2.0f)), &response);
    if (status.ok()) {
      EXPECT_EQ(FloatsOf(response.outputs().at("y")), std::vector<float>(n, 3.0f));
    }
    return status;
  };
  EXPECT_TRUE(predict(100).ok());  // about 450 bytes
  const grpc::Status too_large = predict(1000);  // about 4 KB
  EXPECT_EQ(too_large.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << too_large.error_message();
  EXPECT_TRUE(predict(100).ok());
}

TEST(GrpcFlagsTest, AMalformedChannelArgumentStopsTheServer) {
  ScratchDir dir;
  ServerProcess server(dir.path(), {"--model_base_path=/nonexistent", "--grpc_channel_arguments=grpc.a=1,oops"},
                       /*expect_ready=*/false);
  EXPECT_NE(server.WaitExit(), 0);
  EXPECT_NE(server.Log().find("--grpc_channel_arguments: 'oops' is not key=value"), std::string::npos) << server.Log();
}

TEST(GrpcFlagsTest, SocketPathServesTheApiOnAUnixSocketToo) {
  ScratchDir dir;
  WriteHalfPlusTwo(dir.path() / "half", 1);
  // Short: a Unix socket's path must fit in 108 bytes, and the scratch dir's name is long.
  const fs::path socket = fs::temp_directory_path() / ("lockstep-" + std::to_string(getpid()) + ".sock");
  struct Remove {
    fs::path path;
    ~Remove() { fs::remove(path); }
  } remove_socket{socket};
  ServerProcess server(dir.path(), {"--model_name=half", "--model_base_path=" + (dir.path() / "half").string(),
                                    "--grpc_socket_path=" + socket.string()});
  ASSERT_TRUE(fs::is_socket(socket));
  for (const std::string& target : {"unix:" + socket.string(), server.grpc_target()}) {
    auto stub = tfs::PredictionService::NewStub(MakeChannel(target));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    tfs::PredictResponse response;
    const grpc::Status status = stub->Predict(&context, PredictX("half", {2.0f}), &response);
    ASSERT_TRUE(status.ok()) << target << ": " << status.error_message();
    EXPECT_EQ(FloatsOf(response.outputs().at("y")), std::vector<float>{3.0f}) << target;
  }

  ServerProcess nowhere(dir.path(), {"--model_name=half", "--model_base_path=" + (dir.path() / "half").string(),
                                     "--grpc_socket_path=" + (dir.path() / "no" / "such" / "dir.sock").string()},
                        /*expect_ready=*/false);
  EXPECT_NE(nowhere.WaitExit(), 0);
  EXPECT_NE(nowhere.Log().find("(--grpc_socket_path): a port in use, a missing directory"), std::string::npos)
      << nowhere.Log();
}

}  // namespace
}  // namespace lockstep::e2e
