// ModelConfig (fuzz_targets.h): what --model_config_file and ReloadConfig hand the server.
#include <string_view>

#include "server/batching/batching_parameters.h"
#include "server/model_server_config.h"
#include "tests/fuzz/fuzz_targets.h"

namespace lockstep::fuzz {

void ModelConfig(Bytes data) {
  const std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
  StatusOr<tensorflow::serving::ModelServerConfig> proto = ParseModelServerConfig(text, "models.config");
  if (!proto.ok()) return;
  StatusOr<StoreConfig> config = StoreConfigFromProto(*proto);
  // Whatever is accepted passes the model store's own check, which the manager relies on.
  if (config.ok()) LOCKSTEP_FUZZ_CHECK(ValidateStoreConfig(*config).ok());
  const ServerBatching server;
  (void)ModelBatchingFromConfig(*proto, &server);
  (void)ModelBatchingFromConfig(*proto, nullptr);
}

}  // namespace lockstep::fuzz
