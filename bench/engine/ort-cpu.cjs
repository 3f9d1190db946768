// ONNX Runtime's CPU time per forward (process.cpuUsage around the timed runs): the comparison with the
// engine that does not depend on how busy a shared machine is. Same model, weights and input as
// ../shared/peers/bench.js. Prints one JSON line.
//   PEERS_DIR=DIR node ort-cpu.cjs THREADS RUNS GOLDEN.safetensors
'use strict';
const fs = require('fs');
const path = require('path');

const threads = parseInt(process.argv[2] || '1', 10);
const runs = parseInt(process.argv[3] || '8', 10);
const golden = process.argv[4];
const peersDir = process.env.PEERS_DIR;
if (!peersDir || !golden) {
  console.error('ort-cpu: usage: PEERS_DIR=DIR node ort-cpu.cjs THREADS RUNS GOLDEN.safetensors');
  process.exit(2);
}
const ort = require(require.resolve('onnxruntime-node', { paths: [peersDir] }));

function pixelValues() {
  const buf = fs.readFileSync(golden);
  const hlen = Number(buf.readBigUInt64LE(0));
  const e = JSON.parse(buf.subarray(8, 8 + hlen).toString('utf8')).pixel_values;
  const [s, t] = e.data_offsets;
  const a = new Float32Array((t - s) / 4);
  Buffer.from(a.buffer).set(buf.subarray(8 + hlen + s, 8 + hlen + t));
  return new ort.Tensor('float32', a, e.shape);
}

(async () => {
  const sess = await ort.InferenceSession.create(path.join(peersDir, 'rfdetr_base_seed1.onnx'), {
    executionProviders: ['cpu'], graphOptimizationLevel: 'all', intraOpNumThreads: threads,
    interOpNumThreads: 1, executionMode: 'sequential',
  });
  const feeds = { [sess.inputNames[0]]: pixelValues() };
  for (let i = 0; i < 2; i++) await sess.run(feeds);
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < runs; i++) await sess.run(feeds);
  const c = process.cpuUsage(c0);
  console.log(JSON.stringify({
    threads, runs,
    cpu_ms_per_forward: +((c.user + c.system) / 1000 / runs).toFixed(1),
    wall_ms_per_forward: +(Number(process.hrtime.bigint() - t0) / 1e6 / runs).toFixed(1),
  }));
  await sess.release();
})().catch((e) => { console.error(e); process.exit(1); });
