// The fuzz targets: one function per reader of outside input, each fed arbitrary bytes.
//
// A target returns normally for any input (an error Status is a fine answer); it aborts, so
// that libFuzzer and the corpus replay see a crash, only when the code under test breaks a
// promise its header makes (a decoded tensor that does not encode back to itself, a value
// outside its declared bounds). Sanitizers catch the rest. libFuzzer drives each target
// through fuzz_main.cc (scripts/fuzz); FuzzCorpusTest replays the seeds and every input a
// fuzzer ever crashed on, in tests/fuzz/corpus/<target>/, in the ordinary test suite.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

namespace lockstep::fuzz {

using Bytes = std::span<const uint8_t>;

// TF Serving's REST bodies: a :predict body in every form (row, columnar, b64 strings, several
// inputs) decoded for a few signatures and written back as a response, and :classify /
// :regress bodies as Input protos.
void RestRequest(Bytes data);
// A serialized PredictRequest, as gRPC delivers it: each input's TensorProto decoded, and a
// decoded tensor encoded back and decoded again, which must give the same tensor.
void TensorProto(Bytes data);
// The Open Inference Protocol's infer requests (v2_infer_fuzz.cc), decoded for a signature of
// each datatype; a decoded request's tensors must come back from its answer, written as REST
// JSON (which must parse), REST binary and gRPC raw contents, and read back as a request.
// V2InferJson: a REST body, all JSON. V2InferBinary: the Inference-Header-Content-Length value, a
// newline, then the body (JSON header and binary tensors). V2InferGrpc: a serialized
// ModelInferRequest.
void V2InferJson(Bytes data);
void V2InferBinary(Bytes data);
void V2InferGrpc(Bytes data);
// A model server config in text format (--model_config_file, ReloadConfig): parsed, turned
// into a StoreConfig, and its models' batching parameters read.
void ModelConfig(Bytes data);
// A BatchingParameters text file (--batching_parameters_file); accepted values must lie in
// the documented bounds.
void BatchingParameters(Bytes data);
// A bundle: the input is a little-endian uint32 n, then n bytes of model.pb, then weights.bin;
// the target writes them with a matching MANIFEST.sha256 (so the bytes reach the parsers
// rather than the checksum check), reads the bundle, and compiles what it accepts. The whole
// input is also parsed as a manifest.
void BundleReader(Bytes data);
// A TensorFlow SavedModel: three parts, each but the last after a little-endian uint32 length
// (saved_model.pb, variables/variables.index, then variables.data-00000-of-00001), written as a
// version directory, read, and compiled when accepted. The whole input is also read as a
// serialized tf.Example, as ParseExampleFeature reads a request's examples.
void SavedModel(Bytes data);
// An ONNX model: the input written as model.onnx (and as weights.bin beside it, which external
// data may name), read, and compiled when accepted; the input is also decoded as one
// TensorProto with a 64 MiB cap, which the decoded tensor must respect.
void OnnxModel(Bytes data);
// A TFRecord file of tf.train.Example records (plain or gzip), read into a table strictly and
// skipping corrupt records, or scanned and streamed for an epoch (the first byte chooses the
// label key's and features' form, classes or regression targets, the mode and a prefetch
// thread).
void TfRecordExample(Bytes data);
// A CSV file of labelled examples, read with every column as a feature, with chosen ones, and
// with two regression targets.
void Csv(Bytes data);

}  // namespace lockstep::fuzz

// Aborts with a message when `condition` is false: a broken promise, reported as a crash.
#define LOCKSTEP_FUZZ_CHECK(condition)                                                        \
  do {                                                                                        \
    if (!(condition)) {                                                                       \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (false)
