// Pieces of the CLI on their own: glob expansion, the HTTP client's readiness fallback, verify's comparison
// (in process, with recorded outputs standing in for the engines) and the bench percentiles.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RfdetrClient } from '../../src/client/client.ts';
import { expandGlob, expandInputs } from '../../cli/inputs.ts';
import { percentile } from '../../cli/commands/bench-run.ts';
import { maxAbsDiff, pcc } from '../../src/detect/compare.ts';
import { sidecarSelfReport } from '../../cli/sidecar-info.ts';
import { caseImage, DecodingReplayBackend, FixtureReplayBackend, runInProcess, tinyServer } from './helpers.ts';
import { synthWeights } from '../helpers/synth-weights.ts';
import type { InferInput } from '../../src/sidecar/backend.ts';

test('inputs: globs (*, ?, [..], **), directories, hidden files and non-images', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-glob-'));
  try {
    for (const f of ['a.png', 'b.jpg', 'c.PNG', 'notes.txt', '.hidden.png', 'd/e.png', 'd/f/g.webp', 'd/f/h.txt']) {
      fs.mkdirSync(path.dirname(path.join(tmp, f)), { recursive: true });
      fs.writeFileSync(path.join(tmp, f), 'x');
    }
    assert.deepEqual(expandGlob('*', tmp), ['a.png', 'b.jpg', 'c.PNG']);
    assert.deepEqual(expandGlob('*.png', tmp), ['a.png']);
    assert.deepEqual(expandGlob('[ab].*', tmp), ['a.png', 'b.jpg']);
    assert.deepEqual(expandGlob('?.jpg', tmp), ['b.jpg']);
    assert.deepEqual(expandGlob('**/*.png', tmp), ['a.png', 'd/e.png']);
    assert.deepEqual(expandGlob('d/**', tmp), ['d/e.png', 'd/f/g.webp']);
    assert.deepEqual(expandGlob(`${tmp}/d/*/*.webp`, '/'), [`${tmp}/d/f/g.webp`]);
    assert.deepEqual(expandGlob('*.txt', tmp), ['notes.txt'], 'an explicit extension picks non-image names too');
    const dir = expandInputs(['d', '-'], { cwd: tmp, recursive: true });
    assert.deepEqual(dir.images.map((i) => i.name), ['d/e.png', 'd/f/g.webp', '-']);
    assert.deepEqual(dir.problems, []);
    const twice = expandInputs(['-', '-', 'd/f'], { cwd: tmp, recursive: false });
    assert.equal(twice.problems.length, 1);
    assert.match(twice.problems[0]!, /stdin\) was given more than once/);
    assert.deepEqual(twice.images.map((i) => i.name), ['-', '-', 'd/f/g.webp']);
    const empty = expandInputs(['d'], { cwd: tmp, recursive: false });
    assert.deepEqual(empty.images.map((i) => i.name), ['d/e.png']);
    fs.mkdirSync(path.join(tmp, 'none'));
    assert.match(expandInputs(['none'], { cwd: tmp, recursive: false }).problems[0]!, /none: the directory holds no image files .*add --recursive/);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('client: readiness uses /ready, and /health status for servers without /ready; bad URLs are usage errors', async () => {
  // The fourth /health answer is the first "ok": waitReady must poll past the not-ready ones.
  let healthChecks = 0;
  const flipAt = 4;
  const seedLike = await tinyServer((req, _b, res) => {
    if (req.url === '/health') {
      const status = ++healthChecks >= flipAt ? 'ok' : 'starting';
      res.end(JSON.stringify({ status, model: 'RF-DETR-base', device: null }));
      return;
    }
    res.statusCode = 404;
    res.end('{"detail":"Not Found"}');
  });
  const client = new RfdetrClient(seedLike.url);
  try {
    assert.deepEqual(await client.readiness(), { ready: false, detail: '/health 200 status=starting' });
    assert.deepEqual(await client.waitReady(5, 50), { ready: true, detail: '/health 200 status=ok' });
    assert.equal(healthChecks, 4, 'one check, then waitReady polled until the first ok (two not ready, then ready) and stopped');
  } finally {
    await client.close();
    await seedLike.close();
  }
  assert.throws(() => new RfdetrClient('localhost:20000'), /--url: expected an http:\/\/ or https:\/\/ URL but received "localhost:20000"/);
  assert.throws(() => new RfdetrClient('not a url'), (e: Error & { code?: string }) => e.code === 'E_USAGE');
});

/** Recorded outputs with the boxes shifted: an engine that disagrees with the reference. */
class ShiftedBackend extends FixtureReplayBackend {
  constructor(readonly shift: number, readonly logitNoise = 0, precision?: string) {
    super(precision);
  }
  override async infer(input: InferInput) {
    const r = await super.infer(input);
    for (let i = 0; i < r.outputs.pred_boxes!.length; i += 4) r.outputs.pred_boxes![i] = r.outputs.pred_boxes![i]! + this.shift;
    for (let i = 0; i < r.outputs.logits!.length; i++) r.outputs.logits![i] = r.outputs.logits![i]! + this.logitNoise * Math.sin(i);
    return r;
  }
}

test('verify: cpu as reference, per-case detection-IoU, max-abs and PCC; exit 1 below the gate', async () => {
  const same = await runInProcess(['verify', '--engine', 'tt-host', '--precision', 'bf16', '--json'], {
    factory: (req) => (req.engine === 'cpu' ? new FixtureReplayBackend() : new ShiftedBackend(0, 1e-3)),
  });
  assert.equal(same.code, 0, same.stderr);
  assert.deepEqual(same.requests.map((r) => [r.engine, r.precision]), [['tt-host', 'bf16'], ['cpu', undefined]], 'the engine under test first, then the reference');
  const s = JSON.parse(same.stdout) as { weights: string; cpu_vs_fixtures_max_abs: number | null; pass: boolean; mean_detection_iou: number; cases: { case: string; detection_iou: number; logits_max_abs: number; boxes_max_abs: number; logits_pcc: number }[] };
  assert.equal(s.pass, true);
  assert.equal(s.weights, 'synthetic seed 1', 'no --weights: the fixtures\' synthetic checkpoint');
  assert.equal(s.cpu_vs_fixtures_max_abs, 0, 'the reference is checked against the recorded outputs');
  assert.match(same.requests[1]!.weightsDir, /rfdetr-verify-/);
  assert.equal(same.requests[0]!.weightsDir, same.requests[1]!.weightsDir);
  assert.ok(!fs.existsSync(same.requests[0]!.weightsDir), 'the temporary checkpoint is removed');
  assert.deepEqual(s.cases.map((c) => c.case), ['case-1', 'case-2', 'case-3']);
  for (const c of s.cases) {
    assert.ok(c.logits_max_abs > 9e-4 && c.logits_max_abs <= 1e-3 + 1e-6, `logits max-abs ${c.logits_max_abs}`);
    assert.equal(c.boxes_max_abs, 0);
    assert.ok(c.logits_pcc > 0.99999);
    assert.ok(c.detection_iou > 99, `${c.case}: ${c.detection_iou}`);
  }
  // Shift every box by 2% of the image width: IoU drops well below the gate.
  // No --engine: tt where the build has it, else tt-host; never an engine this build cannot run.
  const built = (await sidecarSelfReport()).engines ?? [];
  const off = await runInProcess(['verify', '--weights', await synthWeights()], {
    factory: (req) => (req.engine === 'cpu' ? new FixtureReplayBackend() : new ShiftedBackend(0.02)),
  });
  assert.equal(off.code, 1, off.stderr);
  const want = built.includes('tt') ? 'tt' : 'tt-host';
  assert.equal(off.requests[0]?.engine, want);
  assert.ok(built.includes(off.requests[0]!.engine), `verify defaulted to ${off.requests[0]!.engine}, built: ${built.join(', ')}`);
  assert.match(off.stdout, new RegExp(`^verify: engine ${want} \\(fp32\\) against cpu`), 'the precision its hello names');
  assert.match(off.stdout, /\n  case-1 +\d+\.\d\d /);
  const mean = Number(/FAIL mean detection-IoU ([\d.]+) < gate 98\.5/.exec(off.stdout)?.[1]);
  assert.ok(mean > 0 && mean < 98.5, off.stdout);
  assert.match(off.stderr, /mean detection-IoU [\d.]+ is below the 98\.5 gate/);
});

test('a misspelt or unbuilt --engine is a usage error (exit 2) naming the built engines, before anything starts', async () => {
  const built = (await sidecarSelfReport()).engines ?? [];
  for (const argv of [['detect', '--engine', 'cpux', caseImage('case-1')], ['bench', '--engine', 'cpux'], ['verify', '--engine', 'tpu'], ['serve', '--engine', 'cpux', '--port', '0']]) {
    const r = await runInProcess(argv);
    assert.equal(r.code, 2, `${argv.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, new RegExp(`--engine "(cpux|tpu)": no such engine; this build has ${built.join(', ')}`));
    assert.equal(r.requests.length, 0, `${argv[0]}: no engine was started`);
  }
  if (!built.includes('tt')) {
    const r = await runInProcess(['detect', '--engine', 'tt', caseImage('case-1')]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--engine "tt": not built into this sidecar; this build has .*RFDETR_WITH_TTNN=ON/);
    assert.equal(r.requests.length, 0);
  }
});

test('verify/bench helpers: max-abs, PCC, nearest-rank percentiles', () => {
  assert.equal(maxAbsDiff(new Float32Array([1, 2, 3]), new Float32Array([1, 2.5, 2])), 1);
  assert.ok(Number.isNaN(maxAbsDiff(new Float32Array([1, NaN]), new Float32Array([1, 2]))));
  assert.equal(maxAbsDiff(new Float32Array(2), new Float32Array(3)), Infinity);
  assert.ok(Math.abs(pcc(new Float32Array([1, 2, 3]), new Float32Array([2, 4, 6])) - 1) < 1e-12);
  assert.ok(Math.abs(pcc(new Float32Array([1, 2, 3]), new Float32Array([3, 2, 1])) + 1) < 1e-12);
  const v = Array.from({ length: 100 }, (_, i) => i + 1);
  assert.equal(percentile(v, 50), 50);
  assert.equal(percentile(v, 90), 90);
  assert.equal(percentile(v, 99), 99);
  assert.equal(percentile([7], 99), 7);
});

test('bench: n measured after the warm-up, at the given concurrency; engine and e2e percentiles', async () => {
  const backend = new FixtureReplayBackend();
  const r = await runInProcess(['bench', '-n', '6', '--warmup', '2', '--concurrency', '2', '--json'], { backend });
  assert.equal(r.code, 0, r.stderr);
  const b = JSON.parse(r.stdout) as { n: number; warmup: number; concurrency: number; images_per_s: number; stages_ms: Record<string, { p50: number; p90: number; p99: number; mean: number }> };
  assert.equal(b.n, 6);
  assert.equal(backend.infers, 8, 'warm-up requests ran but are not in n');
  assert.equal(b.concurrency, 2);
  assert.deepEqual(b.stages_ms.inference, { p50: 1.5, p90: 1.5, p99: 1.5, mean: 1.5 });
  assert.ok(b.stages_ms.total!.p50 > 0 && b.stages_ms.total!.p50 <= b.stages_ms.total!.p99);
  assert.ok(b.stages_ms.preprocess!.p50 > 0);
  assert.ok(b.images_per_s > 0);
  assert.ok(backend.closed, 'the engine is closed after the run');
  const table = await runInProcess(['bench', '-n', '3', '--warmup', '0']);
  assert.match(table.stdout, /\n  engine +1\.50 +1\.50 +1\.50 +1\.50\n/);
});

test('bench: in process, the image goes through detect\'s transport (a plain PNG sent for the sidecar to decode)', async () => {
  const backend = new DecodingReplayBackend();
  const r = await runInProcess(['bench', '-n', '3', '--warmup', '1', '--json'], { backend });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(backend.inputs, ['encoded', 'encoded', 'encoded', 'encoded'], 'every request sent the file, none decoded here');
  const b = JSON.parse(r.stdout) as { stages_ms: Record<string, { p50: number }> };
  assert.ok(b.stages_ms.decode!.p50 >= 2, 'timing_ms.decode holds the sidecar\'s decode (2 ms)');
});

test('info --json: versions, sidecar, weights resolution (never downloads), device', async () => {
  const r = await runInProcess(['info', '--json']);
  assert.equal(r.code, 0, r.stderr);
  const i = JSON.parse(r.stdout) as { package: { version: string }; sidecar: { path: string }; weights: { found: boolean; source?: string; chain: string[] }; device: { logicalCores: number; avx2: boolean } };
  const pkg = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  assert.equal(i.package.version, pkg.version);
  assert.match(i.sidecar.path, /rfdetr-sidecar$/);
  assert.equal(i.weights.found, true);
  assert.equal(i.weights.source, 'env');
  assert.ok(i.device.logicalCores >= 1);
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-info-'));
  try {
    const none = await runInProcess(['info'], { env: { HF_HOME: home, HF_HUB_OFFLINE: '1' } });
    assert.equal(none.code, 0);
    assert.match(none.stdout, /weights   NOT FOUND; tried:\n/);
    assert.match(none.stdout, /download from .*not attempted/);
    assert.match(none.stdout, /fix: rfdetr weights fetch/);
  } finally {
    fs.rmSync(home, { recursive: true, force: true });
  }
});

test('annotate: colours are fixed per class and distinct for neighbours; labels are XML-escaped; empty list is the image', async () => {
  const { annotate, classColour, overlaySvg } = await import('../../src/draw/annotate.ts');
  const sharp = (await import('sharp')).default;
  assert.deepEqual(classColour(17), classColour(17));
  const cols = Array.from({ length: 91 }, (_, i) => classColour(i).join(','));
  for (let i = 1; i < 91; i++) assert.notEqual(cols[i], cols[i - 1], `classes ${i - 1} and ${i} differ`);
  const svg = overlaySvg(100, 80, [{ label: 'a<b>&"c"', label_id: 3, score: 0.5, box: [10, 10, 50, 40] }]);
  assert.ok(svg.includes('a&lt;b&gt;&amp;&quot;c&quot; 0.50'));
  const img = { data: new Uint8Array(100 * 80 * 3).fill(200), width: 100, height: 80 };
  const plain = await sharp(await annotate(img, [], 'png')).raw().toBuffer();
  assert.ok(plain.every((v) => v === 200), 'no detections: the image unchanged');
  const drawn = await sharp(await annotate(img, [{ label: 'a<b>', label_id: 3, score: 0.5, box: [10, 10, 50, 40] }], 'png')).raw().toBuffer({ resolveWithObject: true });
  assert.equal(drawn.info.channels, 3);
  const o = (35 * 100 + 50) * 3; // the right edge, below the label tag
  assert.deepEqual([...drawn.data.subarray(o, o + 3)], classColour(3));
});
