// `rfdetr serve --sidecar-socket` names the model the external sidecar says it loaded (its hello's variant,
// protocol 3), not what the server resolved itself; an older sidecar (protocol 2, no variant) is named as Base
// with one log line; a sidecar the server started that names another variant than the checkpoint is a
// startup error naming both.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { packageRoot, synthBinary } from '../../src/config/paths.ts';
import { synthWeights } from '../helpers/synth-weights.ts';
import { startServe } from '../helpers/serve-child.ts';

const testBinary = path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test');
const fakePath = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'sidecar', 'fake-sidecar.ts');
const rfdetr = path.join(packageRoot, 'bin', 'rfdetr.js');

function tmp(t: { after: (fn: () => void) => void }): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-ext-variant-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A synthetic RF-DETR-Large checkpoint (rfdetr-synth --variant large) in `dir`/large. */
async function largeWeights(dir: string): Promise<string> {
  const out = path.join(dir, 'large');
  await execa(synthBinary(), ['--seed', '0x1', '--variant', 'large', '--out', out, '--quiet']);
  return out;
}

/** Starts `file args` and resolves once it printed its READY line (the socket is listening). */
async function startSidecar(t: { after: (fn: () => void) => void }, file: string, args: string[], env: Record<string, string> = {}) {
  const p = execa(file, args, { reject: false, buffer: false, stdout: 'pipe', stderr: 'pipe', env });
  let err = '';
  p.stderr!.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
  t.after(() => void p.kill('SIGKILL'));
  await new Promise<void>((resolve, reject) => {
    let out = '';
    p.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('READY ')) resolve();
    });
    void p.then((r) => reject(new Error(`the sidecar exited ${String(r.exitCode)} before READY: ${err}`)));
  });
  return { p };  // wrapped: returning the ResultPromise itself would wait for the process to exit
}

interface Named { info: { model: string; model_id: string }; models: { data: { id: string }[] }; health: { model: string }; live: { model: string }; openapi: { info: { description: string } } }
async function named(base: string): Promise<Named> {
  const get = async (p: string) => (await fetch(`${base}${p}`)).json();
  return {
    info: await get('/info') as Named['info'], models: await get('/v1/models') as Named['models'], health: await get('/health') as Named['health'],
    live: await get('/tt-liveness') as Named['live'], openapi: await get('/openapi.json') as Named['openapi'],
  };
}

test('serve --sidecar-socket: an external sidecar that loaded RF-DETR-Large is named Large everywhere, whatever the server resolved', async (t) => {
  assert.ok(existsSync(testBinary), `${testBinary} is not built: run npm run build:sidecar`);
  const dir = tmp(t);
  const socket = path.join(dir, 'ext.sock');
  // The real sidecar (cpu engine) on a Large checkpoint; the server is given a Base one, which it must not believe.
  await startSidecar(t, testBinary, ['--socket', socket, '--weights', await largeWeights(dir), '--engine', 'cpu', '--threads', '1']);
  const { base, log } = await startServe(t, ['--sidecar-socket', socket, '--weights', await synthWeights(1n), '--log-level', 'info']);
  const n = await named(base);
  assert.equal(n.info.model, 'RF-DETR-large');
  assert.equal(n.info.model_id, 'rf-detr-large');
  assert.deepEqual(n.models.data.map((m) => m.id), ['rf-detr-large']);
  assert.equal(n.health.model, 'RF-DETR-large');
  assert.equal(n.live.model, 'rf-detr-large');
  assert.match(n.openapi.info.description, /^RF-DETR-large \(rf-detr-large\)/);
  assert.doesNotMatch(log(), /does not say which variant/);
});

test('serve --sidecar-socket: an older sidecar (protocol 2, no variant) still serves, named Base, with one log line saying the variant is unknown', async (t) => {
  const dir = tmp(t);
  const socket = path.join(dir, 'old.sock');
  await startSidecar(t, process.execPath, ['--import', 'tsx', fakePath, '--socket', socket], { ...process.env as Record<string, string>, FAKE_SCENARIO: 'old-hello' });
  const { base, log } = await startServe(t, ['--sidecar-socket', socket, '--weights', await synthWeights(1n), '--log-level', 'info']);
  const n = await named(base);
  assert.equal(n.info.model, 'RF-DETR-base');
  assert.deepEqual(n.models.data.map((m) => m.id), ['Roboflow/rf-detr-base']);
  assert.equal(n.health.model, 'RF-DETR-base');
  const lines = log().split('\n').filter((l) => l.includes('does not say which variant it loaded'));
  assert.equal(lines.length, 1, log());
  assert.match(lines[0]!, /protocol 2\).*named RF-DETR-base, which may be wrong; upgrade the sidecar/);
});

test('serve: a sidecar the server started that names another variant than the checkpoint stops the server (exit 1), naming both', async (t) => {
  assert.ok(existsSync(testBinary), `${testBinary} is not built: run npm run build:sidecar`);
  const dir = tmp(t);
  // test-echo always says "base"; the checkpoint's tensors say "large".
  const r = await execa(process.execPath, [rfdetr, 'serve', '--engine', 'test-echo', '--weights', await largeWeights(dir), '--host', '127.0.0.1', '--port', '0'], {
    reject: false, env: { RFDETR_SIDECAR: testBinary }, timeout: 60_000,
  });
  assert.equal(r.exitCode, 1, r.stderr.slice(-3000));
  assert.match(r.stderr, /the sidecar says it loaded RF-DETR variant 'base', but the checkpoint in \S+ is 'large' by its tensors/);
});
