// The CLI end to end on the real sidecar and CPU engine with the seed-1 synthetic checkpoint (the one the
// fixtures were made with): `detect --json` equals the fixtures; `rfdetr serve` + `detect --url` gives the same
// JSON as in process; `smoke` PASSes against it; SIGTERM drains and exits 0; no weights → exit 1 with the chain.
// Each sidecar start costs seconds: two starts in all.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { packageRoot, sidecarBinary } from '../../src/config/paths.ts';
import { synthWeights } from '../helpers/synth-weights.ts';
import { binPath, CASES, caseImage, fixtureDetections, runBin } from './helpers.ts';

// Measured on this machine (CPU engine, AVX-512 host): scores within 3.5e-6 of the fixtures, boxes within
// 6.1e-4 px. The margins leave room for other AVX2 hosts and BLAS builds.
const SCORE_TOL = 1e-4;
const BOX_TOL_PX = 0.01;

interface Line { image: string; detections: { label: string; label_id: number; score: number; box: number[] }[]; num_detections: number; timing_ms: Record<string, number> }

function parseLines(stdout: string): Line[] {
  assert.ok(stdout.endsWith('\n'));
  return stdout.slice(0, -1).split('\n').map((l) => JSON.parse(l) as Line);
}

function assertMatchesFixture(l: Line, c: string): void {
  const want = fixtureDetections(c).detections['0.5']!;
  assert.equal(l.num_detections, want.length, `${c}: detection count`);
  l.detections.forEach((d, i) => {
    const w = want[i]!;
    assert.equal(d.label_id, w.label, `${c} #${i} label`);
    assert.equal(d.label, w.label_name);
    assert.ok(Math.abs(d.score - w.score) <= SCORE_TOL, `${c} #${i} score ${d.score} vs ${w.score}`);
    d.box.forEach((v, k) => assert.ok(Math.abs(v - w.box_xyxy[k]!) <= BOX_TOL_PX, `${c} #${i} box[${k}] ${v} vs ${w.box_xyxy[k]}`));
  });
}

const withoutTiming = (ls: Line[]) => ls.map(({ timing_ms: _t, ...rest }) => rest);

let inProcess: Line[] | undefined;

test('e2e: detect --json --weights <seed-1 synth> on the fixture images equals detections.json at 0.5', async () => {
  const weights = await synthWeights();
  const r = await runBin(['detect', '--json', '--weights', weights, ...CASES.map(caseImage)], { timeoutMs: 300_000 });
  assert.equal(r.code, 0, r.stderr);
  const ls = parseLines(r.stdout);
  assert.equal(ls.length, CASES.length);
  CASES.forEach((c, i) => assertMatchesFixture(ls[i]!, c));
  assert.ok(ls.every((l) => (l.timing_ms.inference ?? 0) > 0), 'inference is the engine forward time');
  assert.ok(!r.stderr.includes('\r'), 'no progress bar: stderr is not a TTY');
  assert.match(r.stderr, /; decoded: 3 by the sidecar, 0 here\n/, 'the sidecar decoded the plain PNGs');
  inProcess = ls;
});

test('e2e: rfdetr serve; smoke PASS; detect --url gives the same JSON as in process; SIGTERM drains and exits 0', async () => {
  const weights = await synthWeights();
  const server = execa(process.execPath, [binPath, 'serve', '--host', '127.0.0.1', '--port', '0', '--weights', weights, '--log-level', 'info'], { reject: false, cwd: packageRoot });
  let stderr = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start listening in 120 s:\n${stderr}`)), 120_000);
    server.stderr!.on('data', (c: Buffer) => {
      stderr += c.toString();
      const m = /"event":"listening","url":"([^"]+)"/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    void server.then((r) => reject(new Error(`serve exited ${r.exitCode} before listening:\n${stderr}`)));
  });
  try {
    const smoke = await runBin(['smoke', '--url', url, '--wait', '120'], { timeoutMs: 180_000 });
    assert.equal(smoke.code, 0, smoke.stdout + smoke.stderr);
    const want = fixtureDetections('case-1').detections['0.5']!;
    assert.match(smoke.stdout, new RegExp(`^PASS n=${want.length} counts=\\{`));
    assert.match(stderr, /rfdetr-serve ready: Application startup complete/);
    const remote = await runBin(['detect', '--json', '--url', url, ...CASES.map(caseImage)]);
    assert.equal(remote.code, 0, remote.stderr);
    const rl = parseLines(remote.stdout);
    CASES.forEach((c, i) => assertMatchesFixture(rl[i]!, c));
    if (inProcess) assert.deepEqual(withoutTiming(rl), withoutTiming(inProcess), 'same JSON as in process (timings aside)');
  } finally {
    server.kill('SIGTERM');
  }
  const r = await server;
  assert.equal(r.exitCode, 0, `serve exit after SIGTERM:\n${stderr}`);
  assert.match(stderr, /"event":"drained"/);
});

test('e2e: serve without weights (no flag, empty Hub cache, offline) exits 1 with the chain tried and the fixing commands', async () => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-noweights-'));
  try {
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home, HF_HOME: home, HF_HUB_OFFLINE: '1' };
    const r = await runBin(['serve', '--port', '0'], { env, timeoutMs: 60_000 });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /TT_RF_DETR_WEIGHTS: not set/);
    assert.match(r.stderr, /rfdetr weights fetch/);
    assert.match(r.stderr, /--weights/);
  } finally {
    fs.rmSync(home, { recursive: true, force: true });
  }
});

test('e2e: a misspelt engine is a usage error (exit 2) before any sidecar starts; a bad config.json exits 1 with the sidecar\'s reason', async (t) => {
  // The sidecar is started through a wrapper that records its arguments: a serving start has --socket (the
  // engine list is asked with --list-engines), and a one-shot command makes one serving start at most.
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-e2e-spawns-'));
  t.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const starts = path.join(tmp, 'starts');
  const wrapper = path.join(tmp, 'sidecar');
  fs.writeFileSync(wrapper, `#!/bin/sh\necho "$@" >> '${starts}'\nexec '${sidecarBinary()}' "$@"\n`, { mode: 0o755 });
  const env = { ...process.env, RFDETR_SIDECAR: wrapper };
  const startCount = () => (fs.existsSync(starts) ? fs.readFileSync(starts, 'utf8').split('\n').filter((l) => l.includes('--socket')).length : 0);
  const r = await runBin(['detect', '--json', '--engine', 'no-such-engine', '--weights', await synthWeights(), caseImage('case-1')], { timeoutMs: 60_000, env });
  assert.equal(r.code, 2, r.stderr);
  assert.equal(r.stdout, '');
  assert.match(r.stderr, /--engine "no-such-engine": no such engine; this build has cpu/);
  assert.doesNotMatch(r.stderr, /sidecar|crashed/);
  const usageStarts = startCount();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-e2e-badcfg-'));
  try {
    fs.symlinkSync(path.join(await synthWeights(), 'model.safetensors'), path.join(dir, 'model.safetensors'));
    fs.writeFileSync(path.join(dir, 'config.json'), '{"id2label": ');
    const bad = await runBin(['detect', '--json', '--weights', dir, caseImage('case-1')], { timeoutMs: 60_000, env });
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /the sidecar could not start \(exit status 1, startup failure; not restarted\): engine 'cpu' failed to start .*config\.json: not valid JSON/);
    assert.doesNotMatch(bad.stderr, /crashed/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  assert.equal(usageStarts, 0, 'the misspelt engine was refused before any sidecar started');
  assert.equal(startCount(), 1, 'the sidecar that failed to start was started once: no restart loop for a one-shot command');
});
