// BatchingParameters (fuzz_targets.h): --batching_parameters_file.
#include <string_view>

#include "server/batching/batching_parameters.h"
#include "tests/fuzz/fuzz_targets.h"

namespace lockstep::fuzz {

void BatchingParameters(Bytes data) {
  const std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
  StatusOr<ServerBatching> batching = ParseServerBatching(text, "batching.config");
  if (!batching.ok()) return;
  // The bounds batching_parameters.h promises, which the scheduler sizes its queues by.
  const BatchingOptions& o = batching->defaults;
  LOCKSTEP_FUZZ_CHECK(o.max_batch_size >= 1 && o.max_batch_size <= 1'000'000);
  LOCKSTEP_FUZZ_CHECK(o.batch_timeout.count() >= 0 && o.batch_timeout.count() <= 60'000'000);
  LOCKSTEP_FUZZ_CHECK(o.max_enqueued_batches >= 1);
  LOCKSTEP_FUZZ_CHECK(o.max_enqueued_batches <= (int64_t{1} << 40) / o.max_batch_size);
  LOCKSTEP_FUZZ_CHECK(batching->num_batch_threads >= 1 && batching->num_batch_threads <= 1024);
  for (size_t i = 0; i < o.allowed_batch_sizes.size(); ++i) {
    LOCKSTEP_FUZZ_CHECK(o.allowed_batch_sizes[i] > 0);
    if (i > 0) LOCKSTEP_FUZZ_CHECK(o.allowed_batch_sizes[i] > o.allowed_batch_sizes[i - 1]);
  }
  if (!o.allowed_batch_sizes.empty()) LOCKSTEP_FUZZ_CHECK(o.allowed_batch_sizes.back() == o.max_batch_size);
}

}  // namespace lockstep::fuzz
