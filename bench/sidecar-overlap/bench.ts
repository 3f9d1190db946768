// Whether the sidecar's resize of request N+1 hides behind the forward of request N (bench, not a test): the
// test sidecar's engines with a fixed forward, test-sleep (off the host's cores: the pipeline overlaps) against
// test-echo (on them: serial, the baseline), measured in the same run.
//   node --import tsx bench/sidecar-overlap/bench.ts [--forward-ms 400] [--images 4] [--rounds 3] [--out FILE]
// Per round and engine: N 4000x3000 RGB images sent at once; between the first and the last reply there are
// N-1 forward+resize pairs. Serially the replies are sum(F + R) apart; overlapped about sum(max(F, R)).
// Reported per engine: the span, sum(F), sum(R) (the sidecar's own preprocess_ms and forward_ms), and
// hidden = (sum(F + R) - span) / sum(min(F, R)): about 1 when the resizes are fully hidden, about 0 when serial.
// Results: bench/sidecar-overlap/results.json.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { packageRoot } from '../../src/config/paths.ts';
import { createBackend } from '../../src/sidecar/index.ts';
import { median, r2 } from '../stats.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: { 'forward-ms': { type: 'string', default: '400' }, images: { type: 'string', default: '4' }, rounds: { type: 'string', default: '3' }, out: { type: 'string' } },
});
const forwardMs = Number(values['forward-ms']);
const images = Number(values.images);
const rounds = Number(values.rounds);
const outFile = values.out ?? path.join(here, 'results.json');
const testBinary = path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test');
if (!fs.existsSync(testBinary)) throw new Error(`${testBinary} is not built: run npm install`);
const weights = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-bench-overlap-'));

const W = 4000, H = 3000;
const rgb = new Uint8Array(W * H * 3);
for (let i = 0, x = 11; i < rgb.length; i++) rgb[i] = (x = (x * 1103515245 + 12345) >>> 0) >>> 24;

async function once(engine: 'test-sleep' | 'test-echo') {
  const b = createBackend({
    engine, weightsDir: weights, command: { file: testBinary }, startupTimeoutMs: 60_000,
    env: { RFDETR_TEST_FORWARD_MS: String(forwardMs), RFDETR_TEST_ECHO_FORWARD_MS: String(forwardMs) },
  });
  try {
    await b.ready();
    const t0 = performance.now();
    const replies = await Promise.all(Array.from({ length: images }, () => b.infer({ image: { data: rgb, width: W, height: H } }).then((r) => ({ at: performance.now() - t0, pre: r.preprocessMs, fwd: r.forwardMs }))));
    replies.sort((a, c) => a.at - c.at);
    const rest = replies.slice(1);
    const span = replies[replies.length - 1]!.at - replies[0]!.at;
    const forwards = rest.reduce((n, r) => n + r.fwd, 0);
    const resizes = rest.reduce((n, r) => n + r.pre, 0);
    const mins = rest.reduce((n, r) => n + Math.min(r.fwd, r.pre), 0);
    return { span: r2(span), forwards: r2(forwards), resizes: r2(resizes), hidden: r2((forwards + resizes - span) / mins) };
  } finally {
    await b.close();
  }
}

const load = os.loadavg().map(r2);
const runs: Array<{ round: number; engine: string } & Awaited<ReturnType<typeof once>>> = [];
for (let round = 1; round <= rounds; round++) {
  for (const engine of ['test-echo', 'test-sleep'] as const) {
    const r = await once(engine);
    runs.push({ round, engine, ...r });
    console.log(`round ${round} ${engine.padEnd(10)} replies ${r.span} ms apart over ${images - 1} forwards of ${r.forwards} ms and resizes of ${r.resizes} ms: hidden ${r.hidden}`);
  }
}
const summary = Object.fromEntries((['test-echo', 'test-sleep'] as const).map((e) => [e, { hidden_median: r2(median(runs.filter((r) => r.engine === e).map((r) => r.hidden))) }]));
console.log(`median hidden fraction of min(F, R): test-echo (baseline, serial) ${summary['test-echo']!.hidden_median}, test-sleep (overlapped) ${summary['test-sleep']!.hidden_median}; load ${load.join(' ')}`);
fs.writeFileSync(outFile, `${JSON.stringify({ date: new Date().toISOString(), forwardMs, images, loadavg: load, cpus: os.cpus().length, runs, summary }, null, 2)}\n`);
fs.rmSync(weights, { recursive: true, force: true });
