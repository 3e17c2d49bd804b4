// Runs an ONNX model in onnxruntime (node's onnxruntime-node) on a seeded
// input and writes what `ios-run --input IN --expect OUT` reads: the input
// as raw little-endian float32 in the file's own order (N,H,W,C for a
// TensorFlow export), and every graph output in turn, each sample's values
// together (batch 1: the outputs concatenated in graph order).
// With RUNS, it then times that many runs of the session on the same input
// (after 5 untimed ones) and prints their median: onnxruntime as a peer.
//   node onnxruntime_reference.js MODEL.onnx IN.bin OUT.bin [SEED [RUNS]]
// NODE_PATH must reach onnxruntime-node (scripts/onnxruntime-check.sh sets it).
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

// mulberry32: a small seeded generator, so the input is reproducible.
function generator(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function writeFloats(path, arrays) {
  const count = arrays.reduce((n, a) => n + a.length, 0);
  const buffer = Buffer.alloc(4 * count);
  let at = 0;
  for (const a of arrays) for (const v of a) at = buffer.writeFloatLE(v, at);
  fs.writeFileSync(path, buffer);
}

async function main() {
  const [model, inPath, outPath, seedText, runsText] = process.argv.slice(2);
  if (!outPath) throw new Error('usage: onnxruntime_reference.js MODEL.onnx IN.bin OUT.bin [SEED]');
  const session = await ort.InferenceSession.create(model, {logSeverityLevel: 3});
  if (session.inputNames.length !== 1) {
    throw new Error(`${model}: ${session.inputNames.length} inputs; one is supported`);
  }
  const meta = session.inputMetadata[0];
  const dims = meta.shape.map((d) => (typeof d === 'number' && d > 0 ? d : 1));
  const random = generator(Number(seedText || 0));
  const x = new Float32Array(dims.reduce((a, b) => a * b, 1));
  for (let i = 0; i < x.length; ++i) x[i] = 2 * random() - 1;  // an image scaled to [-1, 1]
  const feeds = {[meta.name]: new ort.Tensor('float32', x, dims)};
  const results = await session.run(feeds);
  const outputs = session.outputNames.map((name) => results[name]);
  const batch = dims[0];
  const perSample = outputs.map((t) => t.data.length / batch);
  const samples = [];
  for (let n = 0; n < batch; ++n) {
    outputs.forEach((t, i) => samples.push(t.data.subarray(n * perSample[i], (n + 1) * perSample[i])));
  }
  writeFloats(inPath, [x]);
  writeFloats(outPath, samples);
  const largest = outputs.reduce((m, t) => Math.max(m, ...Array.from(t.data, Math.abs)), 0);
  console.log(`onnxruntime ${ort.env.versions.common}: ${model}: input [${dims}], outputs ` +
              outputs.map((t, i) => `${session.outputNames[i]} [${t.dims}]`).join(', ') +
              `; largest |output| ${largest.toPrecision(4)}`);
  const runs = Number(runsText || 0);
  if (runs > 0) {
    for (let i = 0; i < 5; ++i) await session.run(feeds);
    const times = [];
    for (let i = 0; i < runs; ++i) {
      const start = process.hrtime.bigint();
      await session.run(feeds);
      times.push(Number(process.hrtime.bigint() - start) / 1e6);
    }
    times.sort((a, b) => a - b);
    console.log(`onnxruntime median ${times[Math.floor(times.length / 2)].toFixed(3)} ms ` +
                `(min ${times[0].toFixed(3)}, max ${times[times.length - 1].toFixed(3)}; ${runs} runs)`);
  }
}

main().catch((e) => {
  console.error(`error: ${e.message}`);
  process.exit(1);
});
