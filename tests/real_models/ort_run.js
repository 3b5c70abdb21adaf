#!/usr/bin/env node
// Runs an ONNX model in onnxruntime-node (the test-only peer) on float32 inputs given as JSON
// and writes its outputs as JSON, for tests that check Lockstep's ONNX exports against it:
//
//   node tests/real_models/ort_run.js --modules NODE_MODULES --model FILE --inputs IN.json --out OUT.json
//
// IN.json: {"<input name>": {"dims": [...], "data": [...]}, ...} (float32 values).
// OUT.json: {"<output name>": {"type": "float32" | "int64" | "string" | ..., "dims": [...],
// "data": [...]}, ...}; int64 values as numbers (exact below 2^53), float32 values as the
// doubles they are, so a reader gets the same floats back.
'use strict';
const fs = require('fs');
const path = require('path');

function parseArgs(argv) {
  const args = {};
  for (let i = 2; i + 1 < argv.length; i += 2) args[argv[i].replace(/^--/, '')] = argv[i + 1];
  for (const k of ['modules', 'model', 'inputs', 'out']) if (!args[k]) throw new Error(`--${k} is required`);
  return args;
}

async function main() {
  const args = parseArgs(process.argv);
  const ort = require(path.join(args.modules, 'onnxruntime-node'));
  const session = await ort.InferenceSession.create(args.model, {intraOpNumThreads: 1});
  const feeds = {};
  for (const [name, value] of Object.entries(JSON.parse(fs.readFileSync(args.inputs, 'utf8')))) {
    feeds[name] = new ort.Tensor('float32', Float32Array.from(value.data), value.dims);
  }
  const results = await session.run(feeds);
  const out = {};
  for (const [name, tensor] of Object.entries(results)) {
    out[name] = {type: tensor.type, dims: tensor.dims, data: Array.from(tensor.data, v => (typeof v === 'bigint' ? Number(v) : v))};
  }
  fs.writeFileSync(args.out, JSON.stringify(out));
}

main().catch(e => {
  console.error(`ort_run: ${e.stack || e}`);
  process.exit(1);
});
