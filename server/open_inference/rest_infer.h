// The Open Inference Protocol's REST infer body, both ways: JSON, or a JSON header followed by
// raw tensor bytes (the binary tensor extension: Inference-Header-Content-Length gives the
// header's length, an input with a "binary_data_size" parameter takes that many bytes of what
// follows, in input order, and an output asked for with "binary_data": true, or with the
// request's "binary_data_output" parameter, comes back the same way).
//
// The JSON is read with simdjson's On-Demand parser straight into the inputs' tensors: no DOM,
// and, once a connection's reader and tensors are warm, no allocation but BYTES elements. "data"
// may be flat or nested (its elements are taken in row-major order; their count must be the
// shape's). Unknown keys and parameters are ignored, as other servers do. An input's fields may
// come in any order; "data" before "name", "datatype" and "shape" (a client that sorts its keys)
// costs a second parse of the data's text.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "runtime/status.h"
#include "server/open_inference/infer_api.h"

namespace lockstep::open_inference {

// The value of the Inference-Header-Content-Length header, on requests and responses.
inline constexpr char kHeaderLengthHeader[] = "Inference-Header-Content-Length";

class InferBodyReader {
 public:
  InferBodyReader();
  ~InferBodyReader();
  InferBodyReader(const InferBodyReader&) = delete;
  InferBodyReader& operator=(const InferBodyReader&) = delete;

  // Takes `body` (its JSON is copied; its binary part must stay valid until ReadRequest is done).
  // `header_length` is the Inference-Header-Content-Length header's value, empty when absent:
  // then the whole body is JSON. InvalidArgument when it is not a number or runs past the body.
  Status Start(std::string_view body, std::string_view header_length);
  // The whole request, in one pass: "id", the "signature_name" and "binary_data_output"
  // parameters, "outputs", and every input, from "data" or from the binary part (all of which
  // the inputs must use).
  Status ReadRequest(InferRequest* request);

  // Gives back buffers grown past what a 1 MiB body needs: a connection keeps its reader.
  void ReleaseIfLarge();

 private:
  struct State;  // simdjson's parser and document, out of this header
  // One element of "inputs" into request->AddInput(). `input` is a simdjson On-Demand object.
  template <typename Object>
  Status ReadInput(Object& input, InferRequest* request);
  std::unique_ptr<State> state_;
};

// Writes the answer into `out` (replacing its contents): the JSON, followed by the outputs
// asked for binary. Returns the JSON's length when binary outputs follow it (the response's
// Inference-Header-Content-Length), else 0.
size_t WriteInferResponse(std::string_view model, int64_t version, std::string_view id,
                          std::span<const AnsweredOutput> outputs, std::string* out);

// Appends `s` as a JSON string: quoted, with '"', '\\' and control characters escaped.
void AppendJsonString(std::string_view s, std::string* out);

}  // namespace lockstep::open_inference
