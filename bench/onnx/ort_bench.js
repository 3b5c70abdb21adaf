#!/usr/bin/env node
// Latency of onnxruntime (onnxruntime-node, CPU) on one ONNX model, in process: the peer of
// bench_onnx, printing the same JSON line {median_us, p10_us, p90_us, runs}.
//
//   node bench/onnx/ort_bench.js --modules DIR/node_modules --model m.onnx --input x \
//       --shape 32,784 --threads 1 --iterations 200 [--input-file in.f32] [--dump out.f32]
//   node bench/onnx/ort_bench.js --modules DIR/node_modules --model m.onnx --inputs inputs.json ...
//
// --inputs: instead of --input/--shape/--input-file, every input from a JSON list of
// {"name", "dtype": "float32" | "int64", "shape": [...], "file": raw little-endian values} (what
// bench_onnx --inputs reads too: a BERT's int64 token ids and mask beside an image's floats).
// onnxruntime-node is required from --modules, else from $ORT_NODE_MODULES, else by the usual
// resolution. --input-file: raw float32 input (else fixed-seed normal); --dump: the first output
// as raw float32, for the cross-check against bench_onnx.
'use strict';
const fs = require('fs');
const path = require('path');
const {seededUniform} = require('./seeded_random.js');

function parseArgs(argv) {
  const args = {input: 'x', threads: 1, iterations: 100};
  for (let i = 2; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '').replace(/-(\w)/g, (_, c) => c.toUpperCase());
    if (i + 1 >= argv.length) throw new Error(`missing value for ${argv[i]}`);
    args[key] = argv[i + 1];
  }
  if (!args.model || (!args.shape && !args.inputs)) throw new Error('--model and --shape (or --inputs) are required');
  args.threads = Number(args.threads);
  args.iterations = Number(args.iterations);
  return args;
}

function loadOrt(modules) {
  const dir = modules || process.env.ORT_NODE_MODULES;
  return require(dir ? path.resolve(dir, 'onnxruntime-node') : 'onnxruntime-node');
}

// Normal values from a fixed seed (mulberry32 + Box-Muller).
function randomNormal(n, seed) {
  const uniform = seededUniform(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; ++i) {
    out[i] = Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform());
  }
  return out;
}

function percentile(sorted, p) {
  return sorted[Math.round(p * (sorted.length - 1))];
}

async function main() {
  const args = parseArgs(process.argv);
  const ort = loadOrt(args.modules);
  const feeds = {};
  if (args.inputs) {
    for (const spec of JSON.parse(fs.readFileSync(args.inputs, 'utf8'))) {
      const buf = fs.readFileSync(spec.file);
      const bytes = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length);
      const count = spec.shape.reduce((a, b) => a * b, 1);
      let data;
      if (spec.dtype === 'float32') data = new Float32Array(bytes);
      else if (spec.dtype === 'int64') data = new BigInt64Array(bytes);
      else throw new Error(`${spec.name}: dtype ${spec.dtype} (float32 or int64)`);
      if (data.length !== count) throw new Error(`${spec.file}: ${data.length} values, want ${count}`);
      feeds[spec.name] = new ort.Tensor(spec.dtype, data, spec.shape);
    }
  } else {
    const dims = args.shape.split(',').map(Number);
    const count = dims.reduce((a, b) => a * b, 1);
    let data;
    if (args.inputFile) {
      const buf = fs.readFileSync(args.inputFile);
      if (buf.length !== count * 4) throw new Error(`${args.inputFile}: ${buf.length} bytes, want ${count * 4}`);
      data = new Float32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
    } else {
      data = randomNormal(count, 42);
    }
    feeds[args.input] = new ort.Tensor('float32', data, dims);
  }

  const session = await ort.InferenceSession.create(args.model, {
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    executionProviders: ['cpu'],
  });
  let outputs;
  const warmup = Math.max(3, Math.floor(args.iterations / 10));
  for (let i = 0; i < warmup; ++i) outputs = await session.run(feeds);
  const us = [];
  for (let i = 0; i < args.iterations; ++i) {
    const start = process.hrtime.bigint();
    outputs = await session.run(feeds);
    us.push(Number(process.hrtime.bigint() - start) / 1000);
  }

  if (args.dump) {
    const out = outputs[session.outputNames[0]].data;
    fs.writeFileSync(args.dump, Buffer.from(out.buffer, out.byteOffset, out.byteLength));
  }
  us.sort((a, b) => a - b);
  const round = (v) => Math.round(v * 10) / 10;
  console.log(JSON.stringify({
    median_us: round(percentile(us, 0.5)),
    p10_us: round(percentile(us, 0.1)),
    p90_us: round(percentile(us, 0.9)),
    runs: args.iterations,
  }));
}

main().catch((err) => {
  console.error(`ort_bench: ${err.stack || err}`);
  process.exit(1);
});
