#!/usr/bin/env node
// Runs a Silero VAD in onnxruntime-node (the test-only peer) over raw 16 kHz float32 audio as
// its callers do (the package's own lib.js): chunks of 512 samples, each with the 64 before it
// as context, the state fed back from one chunk to the next; writes every chunk's probability
// as JSON.
//
//   node reference.js --modules NODE_MODULES --model FILE --audio FILE --out OUT.json
'use strict';
const fs = require('fs');
const path = require('path');

const kWindow = 512;
const kContext = 64;

async function main() {
  const args = {};
  for (let i = 2; i + 1 < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
  for (const k of ['modules', 'model', 'audio', 'out']) if (!args[k]) throw new Error(`--${k} is required`);
  const ort = require(path.join(args.modules, 'onnxruntime-node'));
  const session = await ort.InferenceSession.create(args.model, {intraOpNumThreads: 1});
  const bytes = fs.readFileSync(args.audio);
  const audio = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
  let state = new Float32Array(2 * 128);
  const input = new Float32Array(kContext + kWindow);
  const sr = new ort.Tensor('int64', BigInt64Array.from([16000n]), []);
  const probabilities = [];
  for (let at = 0; at + kWindow <= audio.length; at += kWindow) {
    input.copyWithin(0, kWindow);  // the last 64 samples of the chunk before, zeros at first
    input.set(audio.subarray(at, at + kWindow), kContext);
    const out = await session.run({
      input: new ort.Tensor('float32', input.slice(), [1, kContext + kWindow]),
      state: new ort.Tensor('float32', state, [2, 1, 128]),
      sr,
    });
    probabilities.push(out.output.data[0]);
    state = Float32Array.from(out.stateN.data);
  }
  fs.writeFileSync(args.out, JSON.stringify({window: kWindow, context: kContext, probabilities}));
}

main().catch(e => {
  console.error(`reference: ${e.stack || e}`);
  process.exit(1);
});
