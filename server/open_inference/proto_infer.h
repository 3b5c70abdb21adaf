// The Open Inference Protocol's gRPC infer messages, both ways (ModelInfer, ModelStreamInfer).
//
// Inputs come in typed `contents` (FP32 in fp32_contents, INT32 in int_contents, BYTES in
// bytes_contents, ...; BF16 has no typed field and must come raw) or, for every input at once,
// in raw_input_contents (raw bytes as datatype.h describes them). Answers always carry their
// outputs in raw_output_contents, as Triton's do; the response is overwritten in place, so that a
// pooled response keeps its strings' capacity from call to call.
#pragma once

#include <span>
#include <string_view>

#include "inference/grpc_service.pb.h"
#include "runtime/status.h"
#include "server/open_inference/infer_api.h"

namespace lockstep::open_inference {

// The whole request: id, the "signature_name" parameter, the outputs asked for, every input.
Status ReadInferRequest(const inference::ModelInferRequest& message, InferRequest* request);
// The answer into `response`, in place.
void WriteInferResponse(std::string_view model, int64_t version, std::string_view id,
                        std::span<const AnsweredOutput> outputs, inference::ModelInferResponse* response);

}  // namespace lockstep::open_inference
