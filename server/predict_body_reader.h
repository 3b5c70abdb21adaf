// The fast path for TF Serving REST :predict bodies: simdjson's On-Demand parser reads the
// numbers straight into the tensors' buffers, with no DOM and, once warm, no allocation but
// the tensors themselves (bench/serving/README.md: 7x the DOM path on a 784-float row).
//
// It reads the common forms only: "instances" (row form) for a one-input signature, "inputs"
// (columnar) as one value or an object naming every input, with an optional
// "signature_name"; float32 and float64 inputs of numbers; bodies up to kMaxBodyBytes. Every
// other body it declines: strings, b64, NaN / Infinity, integers for integer inputs, named
// instances, anything malformed, and larger bodies (whose buffers a connection should not keep). A declined body goes to the DOM path (rest_json.h), which reads everything TF
// Serving accepts and words every error, with its offset. What the fast path accepts, the DOM
// path accepts too, with the same values bit for bit (the float32 rounding, -0, the largest
// float rule): tests/server/predict_body_reader_test.cc checks the two against each other.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/session.h"

namespace lockstep {

class PredictBodyReader {
 public:
  PredictBodyReader();
  ~PredictBodyReader();
  PredictBodyReader(const PredictBodyReader&) = delete;
  PredictBodyReader& operator=(const PredictBodyReader&) = delete;

  // Reads `body` (a copy of it: `body` need not outlive the call) in one pass: its form, its
  // signature name, and each tensor value's numbers and shape. False: the fast path declines it.
  bool Start(std::string_view body);
  // After a successful Start.
  const std::string& signature_name() const { return signature_name_; }  // empty: serving_default
  bool row_format() const { return row_format_; }

  // The tensors the body gives `signature`'s inputs, in the signature's order, in their dtypes.
  // False: declined (`inputs` is then unspecified).
  bool DecodeInputs(const Signature& signature, std::vector<NamedTensor>* inputs);

  // Gives back buffers grown past what a body of kMaxBodyBytes needs in the usual case: a
  // connection keeps its reader between requests, and one odd request must not pin memory for
  // the connection's lifetime.
  void ReleaseIfLarge();
  // 1 MiB: about 100 k numbers, a batch of 128 rows of 784.
  static constexpr size_t kMaxBodyBytes = size_t{1} << 20;

 private:
  struct State;  // simdjson's parser and document, out of this header
  // One pass over the padded body in `s`: false when declined (or out of room, s.overflowed).
  bool Read(State& s, size_t size);

  std::unique_ptr<State> state_;
  std::string signature_name_;
  bool row_format_ = true;
};

}  // namespace lockstep
