// TensorFlow Serving's model server configuration (--model_config_file, the gRPC reload
// request, and --model_name/--model_base_path) turned into the model store's StoreConfig.
#pragma once

#include <string>
#include <string_view>

#include "model_store/model_config.h"
#include "runtime/status.h"
#include "tensorflow_serving/config/model_server_config.pb.h"

namespace lockstep {

// The largest config file read; real ones are a few kilobytes.
inline constexpr size_t kMaxConfigFileBytes = size_t{16} << 20;

// Platforms this server accepts in a config. An empty model_platform means "tensorflow", as
// upstream. Which reader a version needs is decided by its files (runtime/model_dir.h).
inline constexpr std::string_view kSupportedPlatforms[] = {"tensorflow", "lockstep", "onnx"};

// Parses ModelServerConfig text format. Errors name `source` (the file), line and column:
// "models.config:3:7: Message type "tensorflow.serving.ModelConfig" has no field named "nmae".".
StatusOr<tensorflow::serving::ModelServerConfig> ParseModelServerConfig(std::string_view text,
                                                                      std::string_view source);

// The text of the config file at `path` (at most kMaxConfigFileBytes).
StatusOr<std::string> ReadConfigFileText(const std::string& path);

// The proto as a validated StoreConfig: a model_config_list (custom_model_config is
// Unimplemented), supported platforms, and everything ValidateStoreConfig checks.
StatusOr<StoreConfig> StoreConfigFromProto(const tensorflow::serving::ModelServerConfig& proto);

// --model_name / --model_base_path: one model, latest version, no labels. A relative base
// path is made absolute against the working directory.
StatusOr<StoreConfig> SingleModelConfig(const std::string& name, const std::string& base_path);

}  // namespace lockstep
