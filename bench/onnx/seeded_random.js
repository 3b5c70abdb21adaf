// Uniform numbers in [0, 1) from a fixed seed (mulberry32): the same sequence on every machine,
// for inputs that two runtimes, or two runs, must be given alike. Shared by ort_bench.js and the
// real-model suite's references (tests/real_models/npm_references.js).
'use strict';

function seededUniform(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

module.exports = {seededUniform};
