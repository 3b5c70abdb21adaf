// How a status code reaches a REST client: TF Serving's mapping to HTTP statuses
// (docs: tf-serving-api.md, section 1). gRPC needs none: our codes are numbered as its own.
#pragma once

#include "runtime/status.h"

namespace lockstep {

int HttpStatusFor(StatusCode code);

}  // namespace lockstep
