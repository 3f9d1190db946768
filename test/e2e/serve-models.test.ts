// `rfdetr serve --models FILE` end to end with real sidecars (cpu engine, one thread each) on synthetic checkpoints:
// Base (seed 1), Nano (seed 1) and a second Base under another id each answer the fixture image with their own
// model's detections (test/fixtures/rfdetr-synth and ../shared/fixtures/rfdetr-family goldens); 8 clients mixed
// across the models lose nothing while a SIGHUP swaps the second Base to a seed-2 checkpoint, whose answers
// (equal to `rfdetr detect` on it) are all its answers once the swap is logged, and whose predecessor's sidecar
// process is gone. A model whose weights directory is bad is reported by id while the others serve. What a swap
// costs the traffic (round trips before / during / after), its times and the peak RSS: bench/swap/bench.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { packageRoot, testFixturesDir } from '../../src/config/paths.ts';
import { startServe } from '../helpers/serve-child.ts';
import { synthVariantWeights, synthWeights, tempDir } from '../helpers/synth-weights.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { childrenOf } from '../helpers/proc.ts';
import { runBin } from '../cli/helpers.ts';
import { rawExchange } from '../http/helpers.ts';
import { skipOrFail } from '../helpers/skip.ts';
import { sidecarEngines } from '../../cli/sidecar-info.ts';

const familyDir = process.env.RFDETR_FAMILY_FIXTURES || path.resolve(packageRoot, '..', 'shared', 'fixtures', 'rfdetr-family');
const THRESHOLD = 0.3;

interface Det { label_id: number; score: number; box: number[] }
interface RefDet { label: number; score: number; box_xyxy: number[] }

const baseCase = path.join(testFixturesDir, 'rfdetr-synth', 'case-1');
const nanoCase = path.join(familyDir, 'nano', 'case-1');
const refOf = (dir: string): Det[] => (JSON.parse(fs.readFileSync(path.join(dir, 'detections.json'), 'utf8')).detections[String(THRESHOLD)] as RefDet[])
  .map((d) => ({ label_id: d.label, score: d.score, box: d.box_xyxy }));

/** Same detections: count, and each in order with its label, score within 1e-4 and box within 0.05 px. */
function same(got: Det[], want: Det[]): string | null {
  if (got.length !== want.length) return `${got.length} detections, expected ${want.length}`;
  for (const [i, d] of got.entries()) {
    const w = want[i]!;
    if (d.label_id !== w.label_id || Math.abs(d.score - w.score) > 1e-4 || d.box.some((v, k) => Math.abs(v - w.box[k]!) > 0.05)) {
      return `#${i}: ${JSON.stringify(d)} vs ${JSON.stringify(w)}`;
    }
  }
  return null;
}

const cmdline = (pid: number) => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
};
// A process reaped between the two reads is gone, not an error.
const alive = (pid: number) => {
  try {
    return !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
};

async function predict(base: string, image: string, model: string): Promise<{ status: number; body: any }> {
  const r = await fetch(`${base}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ image, model, threshold: THRESHOLD, max_detections: 300 }) });
  return { status: r.status, body: await r.json() };
}

test('serve --models: Base, Nano and a second Base each answer with their own detections under 8 mixed clients; a SIGHUP swap of one loses no request', { timeout: 900_000 }, async (t) => {
  if (!fs.existsSync(familyDir)) return skipOrFail(t, `no family fixtures at ${familyDir} (set RFDETR_FAMILY_FIXTURES)`);
  const base1 = await synthWeights(1n);
  const nano1 = await synthVariantWeights('nano');
  const base2 = await synthWeights(2n);
  const root = tempDir('rfdetr-models-');
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  // base-b's own copy of the seed-1 checkpoint: its sidecar is told apart from base's by its command line.
  const baseB = path.join(root, 'base-b-seed1');
  fs.cpSync(base1, baseB, { recursive: true });
  const file = path.join(root, 'models.json');
  const write = (b: string) => fs.writeFileSync(file, JSON.stringify({ models: [{ id: 'base', weights: base1 }, { id: 'nano', weights: nano1 }, { id: 'base-b', weights: b }] }));
  write(baseB);

  // The seed-2 reference: `rfdetr detect` on the same image (one more sidecar, before the server's).
  const images = { base: fs.readFileSync(path.join(baseCase, 'input.png')).toString('base64'), nano: fs.readFileSync(path.join(nanoCase, 'input.png')).toString('base64') };
  const d2 = await runBin(['detect', '--json', '--threads', '1', '--weights', base2, '--threshold', String(THRESHOLD), '--max-detections', '300', path.join(baseCase, 'input.png')], { timeoutMs: 300_000 });
  assert.equal(d2.code, 0, d2.stderr);
  const want = { base: refOf(baseCase), nano: refOf(nanoCase), seed2: (JSON.parse(d2.stdout.trim()) as { detections: Det[] }).detections };
  assert.ok(same(want.seed2, want.base) !== null, 'the seed-2 checkpoint detects otherwise than seed 1');

  const { child, base } = await startServe(t, ['--models', file, '--threads', '1', '--deadline-ms', '300000', '--queue-size', '64']);
  let log = '';
  child.stderr.on('data', (d) => (log += d));
  const sidecars = () => childrenOf(child.pid!).filter((p) => /rfdetr-sidecar/.test(cmdline(p)));
  const oldB = sidecars().filter((p) => cmdline(p).includes(baseB));
  assert.equal(oldB.length, 1, `one sidecar on base-b's checkpoint: ${sidecars().map(cmdline).join(' | ')}`);
  assert.equal(sidecars().length, 3, 'one sidecar per model');

  const list = (await (await fetch(`${base}/v1/models`)).json()) as { data: { id: string; input_size: number[]; state: string }[] };
  assert.deepEqual(list.data.map((m) => [m.id, m.input_size, m.state]), [['base', [560, 560], 'ready'], ['nano', [384, 384], 'ready'], ['base-b', [560, 560], 'ready']]);

  // 8 clients, each cycling over the three models; every answer is checked against its model's detections.
  let stop = false;
  let swapLogged = false;
  const failures: string[] = [];
  const counts = { base: 0, nano: 0, 'base-b-seed1': 0, 'base-b-seed2': 0, afterSwap: 0 };
  const client = async (k: number) => {
    for (let i = k; !stop; i++) {
      const model = (['base', 'nano', 'base-b'] as const)[i % 3]!;
      const loggedBefore = swapLogged;
      const r = await predict(base, model === 'nano' ? images.nano : images.base, model).catch((e: Error) => ({ status: 0, body: { error: `${e.message}: ${String(e.cause)}` } }));
      if (r.status !== 200) {
        failures.push(`${model}: ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
        continue;
      }
      const dets = r.body.detections as Det[];
      if (model !== 'base-b') {
        const why = same(dets, want[model]);
        if (why) failures.push(`${model}: ${why}`);
        else counts[model]++;
        continue;
      }
      const seed1 = same(dets, want.base) === null;
      const seed2 = same(dets, want.seed2) === null;
      if (seed2) counts['base-b-seed2']++;
      else if (seed1) counts['base-b-seed1']++;
      else failures.push(`base-b: neither checkpoint's detections: ${same(dets, want.base)}`);
      // Sent after the swap was logged: only the new checkpoint may answer.
      if (loggedBefore) {
        counts.afterSwap++;
        if (!seed2) failures.push('base-b answered from the old checkpoint after the swap was logged');
      }
    }
  };
  const clients = Array.from({ length: 8 }, (_, k) => client(k));
  await waitFor('every model answered before the swap', () => counts.base > 2 && counts.nano > 2 && counts['base-b-seed1'] > 2, 300_000);

  write(base2);
  child.kill('SIGHUP');
  const swapped = await waitFor('the swap logged', () => /^.*"event":"model_swapped".*$/m.exec(log)?.[0], 300_000);
  swapLogged = true;
  await waitFor('the old base-b sidecar gone', () => !alive(oldB[0]!), 60_000);
  await waitFor('answers sent after the swap', () => counts.afterSwap >= 6, 300_000);
  stop = true;
  await Promise.all(clients);

  assert.deepEqual(failures, [], 'no request failed or answered from the wrong model');
  assert.equal(alive(oldB[0]!), false, 'the old sidecar process is gone');
  assert.equal(sidecars().length, 3, 'three sidecars again');
  assert.ok(sidecars().some((p) => cmdline(p).includes(base2)), 'a sidecar on the seed-2 checkpoint');
  assert.equal((JSON.parse(swapped) as { model: string }).model, 'base-b');
  assert.ok(counts['base-b-seed1'] > 2 && counts['base-b-seed2'] >= 6, `answers: ${JSON.stringify(counts)}`);
});

test('serve --weights ID=DIR: a model whose weights directory is bad is reported by id while the others serve; unknown models 404 in every API\'s shape', { timeout: 600_000 }, async (t) => {
  const nano1 = await synthVariantWeights('nano');
  const missing = path.join(tempDir('rfdetr-missing-'), 'nothing-here');
  const { base } = await startServe(t, ['--weights', `nano=${nano1}`, '--weights', `broken=${missing}`, '--min-ready', '1', '--threads', '1']);
  const health = (await (await fetch(`${base}/health`)).json()) as { status: string; models: { id: string; state: string; failure: string | null }[] };
  assert.equal(health.status, 'ok', '--min-ready 1: ready with one of two');
  assert.deepEqual(health.models.map((m) => [m.id, m.state]), [['nano', 'ready'], ['broken', 'failed']]);
  assert.match(health.models[1]!.failure!, /nothing-here/, 'the failure names the directory');
  const png = fs.readFileSync(path.join(baseCase, 'input.png')).toString('base64');
  assert.equal((await predict(base, png, 'nano')).status, 200);
  const broken = await predict(base, png, 'broken');
  assert.equal(broken.status, 503);
  assert.match(broken.body.detail, /the engine of model broken failed and is not restarting \(.*nothing-here/);
  const unknown = await predict(base, png, 'large');
  assert.equal(unknown.status, 404);
  assert.match(unknown.body.detail, /model "large" is not served here: this server serves nano, broken;/);
  const rf = await fetch(`${base}/infer/object_detection`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model_id: 'large', image: { type: 'base64', value: png } }) });
  assert.equal(rf.status, 404);
  assert.match(((await rf.json()) as { message: string }).message, /serves nano, broken/);
  // DeepStack's route reads and drops an unknown model's body before its 404 (a large upload:
  // test/http/compat-deepstack.test.ts); here the whole request goes in one write.
  const boundary = 'x-rfdetr-test';
  const multipart = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="x.png"\r\nContent-Type: image/png\r\n\r\n`),
    Buffer.from(png, 'base64').subarray(0, 64),
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  const raw = await rawExchange(base, Buffer.concat([
    Buffer.from(`POST /v1/vision/custom/large HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${multipart.length}\r\n\r\n`),
    multipart,
  ]));
  assert.match(raw, /^HTTP\/1\.1 404 /);
  assert.match(raw, /"success":false,"error":"model \\"large\\" is not served here: this server serves nano, broken;/);
});

test('serve --models: a SIGHUP swap that changes a model\'s precision (fp32 → int8) starts a sidecar running the new one and answers from it', { timeout: 600_000 }, async (t) => {
  const cpu = (await sidecarEngines(process.env))?.engines.get('cpu');
  if (!cpu?.built || !cpu.precisions.includes('int8')) {
    return skipOrFail(t, `the cpu engine here runs ${cpu?.built ? cpu.precisions.join(', ') : 'nothing (not built)'}, not int8: run on a CPU with AVX-512 VNNI or AVX-VNNI`);
  }
  const nano1 = await synthVariantWeights('nano');
  const root = tempDir('rfdetr-models-precision-');
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const file = path.join(root, 'models.json');
  const write = (entry: object) => fs.writeFileSync(file, JSON.stringify({ models: [{ id: 'n', weights: nano1, ...entry }] }));
  write({});
  const { child, base, log } = await startServe(t, ['--models', file, '--threads', '1']);
  const model = async () => ((await (await fetch(`${base}/info`)).json()) as { models: { id: string; precision: string | null; params: { precision?: string } }[] }).models[0]!;
  const png = fs.readFileSync(path.join(nanoCase, 'input.png')).toString('base64');
  assert.equal((await model()).precision, 'fp32');
  const before = await predict(base, png, 'n');
  assert.equal(before.status, 200);
  assert.equal(same(before.body.detections, refOf(nanoCase)), null, 'fp32: the golden detections');
  const oldSidecar = childrenOf(child.pid!).filter((p) => /rfdetr-sidecar/.test(cmdline(p)));
  assert.equal(oldSidecar.length, 1);

  write({ precision: 'int8' });
  child.kill('SIGHUP');
  await waitFor('the swap logged', () => /"event":"model_swapped"/.test(log()), 300_000);
  const after = await model();
  assert.deepEqual([after.precision, after.params.precision], ['int8', 'int8'], 'the new sidecar\'s hello names int8');
  const r = await predict(base, png, 'n');
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.ok(Array.isArray(r.body.detections));
  await waitFor('the fp32 sidecar gone', () => !alive(oldSidecar[0]!), 60_000);
  const now = childrenOf(child.pid!).filter((p) => /rfdetr-sidecar/.test(cmdline(p)));
  assert.equal(now.length, 1, `one sidecar: ${now.map(cmdline).join(' | ')}`);
});
