// tensorflow_model_server's flag syntax and defaults, and clear errors for bad ones.
#include <gtest/gtest.h>

#include "server/flags.h"

namespace lockstep {
namespace {

TEST(ServerFlagsTest, DefaultsAreTfServings) {
  StatusOr<ServerFlags> f = ParseServerFlags({});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->port, 8500);
  EXPECT_EQ(f->rest_api_port, 0);
  EXPECT_EQ(f->rest_api_timeout_in_ms, 30000);
  EXPECT_EQ(f->model_name, "default");
  EXPECT_EQ(f->file_system_poll_wait_seconds, 1);
  EXPECT_EQ(f->model_config_file_poll_wait_seconds, 0);
  EXPECT_FALSE(f->allow_version_labels_for_unavailable_models);
  EXPECT_TRUE(f->enable_model_warmup);
  EXPECT_EQ(f->num_request_iterations_for_warmup, 1);
}

TEST(ServerFlagsTest, ParsesBothSpellingsAndBooleans) {
  StatusOr<ServerFlags> f = ParseServerFlags({"--port=9000", "--rest_api_port", "9001", "--model_name=m",
                                              "--model_base_path=/models/m", "--allow_version_labels_for_unavailable_models",
                                              "--rest_api_enable_cors_support=false", "--rest_api_timeout_in_ms=5",
                                              "--max_model_memory_bytes=1073741824", "--enable_model_warmup=false",
                                              "--num_request_iterations_for_warmup=4"});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->port, 9000);
  EXPECT_EQ(f->rest_api_port, 9001);
  EXPECT_EQ(f->model_name, "m");
  EXPECT_EQ(f->model_base_path, "/models/m");
  EXPECT_TRUE(f->allow_version_labels_for_unavailable_models);
  EXPECT_FALSE(f->rest_api_enable_cors_support);
  EXPECT_EQ(f->rest_api_timeout_in_ms, 5);
  EXPECT_EQ(f->max_model_memory_bytes, int64_t{1} << 30);
  EXPECT_FALSE(f->enable_model_warmup);
  EXPECT_EQ(f->num_request_iterations_for_warmup, 4);
  EXPECT_TRUE(ValidateServerFlags(*f).ok());
}

TEST(ServerFlagsTest, NamesTheFlagInEveryError) {
  auto error = [](std::vector<std::string> args) {
    StatusOr<ServerFlags> f = ParseServerFlags(args);
    if (f.ok()) return ValidateServerFlags(*f).message();
    return f.status().message();
  };
  EXPECT_NE(error({"--enable_batchingg"}).find("unknown flag --enable_batchingg"), std::string::npos);
  EXPECT_NE(error({"--port=http"}).find("--port"), std::string::npos);
  EXPECT_NE(error({"--port=99999999999"}).find("--port"), std::string::npos);
  EXPECT_NE(error({"--port"}).find("--port needs a value"), std::string::npos);
  EXPECT_NE(error({"--help=maybe"}).find("--help"), std::string::npos);
  EXPECT_NE(error({"model"}).find("unexpected argument 'model'"), std::string::npos);
  EXPECT_NE(error({"--model_base_path=/m", "--port=70000"}).find("--port=70000"), std::string::npos);
  EXPECT_NE(error({"--model_base_path=/m", "--port=8500", "--rest_api_port=8500"}).find("must differ"),
            std::string::npos);
  EXPECT_NE(error({}).find("--model_config_file"), std::string::npos);
  EXPECT_NE(error({"--model_base_path=/m", "--rest_api_timeout_in_ms=0"}).find("--rest_api_timeout_in_ms"),
            std::string::npos);
  EXPECT_NE(error({"--model_base_path=/m", "--max_model_memory_bytes=-1"})
                .find("--max_model_memory_bytes must not be negative"),
            std::string::npos);
  // Upstream reads it only when above 0, so a command line that spells out 0 must start.
  EXPECT_EQ(error({"--model_base_path=/m", "--num_request_iterations_for_warmup=0"}), "");
}

TEST(ServerFlagsTest, GrpcChannelArgumentsAreKeyValuePairs) {
  const StatusOr<std::vector<GrpcChannelArgument>> args =
      ParseGrpcChannelArguments("grpc.max_concurrent_streams=100, grpc.primary_user_agent = lockstep ,x=-3,y=9999999999");
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  ASSERT_EQ(args->size(), 4u);
  EXPECT_EQ((*args)[0].key, "grpc.max_concurrent_streams");
  EXPECT_EQ(std::get<int>((*args)[0].value), 100);
  EXPECT_EQ((*args)[1].key, "grpc.primary_user_agent");
  EXPECT_EQ(std::get<std::string>((*args)[1].value), "lockstep");
  EXPECT_EQ(std::get<int>((*args)[2].value), -3);
  EXPECT_EQ(std::get<std::string>((*args)[3].value), "9999999999") << "beyond int: a string, as upstream";
  EXPECT_TRUE(ParseGrpcChannelArguments("")->empty());

  EXPECT_EQ(ParseGrpcChannelArguments("grpc.a=1,oops").status().message(),
            "--grpc_channel_arguments: 'oops' is not key=value");
  EXPECT_EQ(ParseGrpcChannelArguments("=1").status().message(), "--grpc_channel_arguments: '=1' is not key=value");
  EXPECT_EQ(ParseGrpcChannelArguments("grpc.a=1,").status().message(),
            "--grpc_channel_arguments: '' is not key=value");
  StatusOr<ServerFlags> flags = ParseServerFlags({"--model_base_path=/m", "--grpc_channel_arguments=bad"});
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(ValidateServerFlags(*flags).message(), "--grpc_channel_arguments: 'bad' is not key=value");
}

TEST(ServerFlagsTest, UsageListsEveryFlag) {
  const std::string usage = ServerUsage();
  for (const char* flag : {"--port", "--rest_api_port", "--rest_api_num_threads", "--rest_api_timeout_in_ms",
                           "--model_name", "--model_base_path", "--model_config_file",
                           "--model_config_file_poll_wait_seconds", "--file_system_poll_wait_seconds",
                           "--allow_version_labels_for_unavailable_models", "--grpc_max_threads", "--version",
                           "--help", "--ssl_config_file", "--grpc_channel_arguments", "--grpc_socket_path"}) {
    EXPECT_NE(usage.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace lockstep
