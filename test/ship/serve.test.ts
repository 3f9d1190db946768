// The staged serving tree, run the way the container and tt-model run it: `bin/rfdetr serve` (CPU engine,
// synthetic weights) prints the ready text tt-model waits for (its kind's ready line) exactly once, /ready then answers 200 (so the Docker
// HEALTHCHECK passes), and SIGTERM — what `docker stop` and Kubernetes send to PID 1 — ends it with exit 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { parse } from 'yaml';
import { packageRoot, sidecarBinary } from '../../src/config/paths.ts';
import { ROUTES, readText } from './ship-helpers.ts';
import { KINDS } from './tt-model-rules.ts';
import { synthWeights } from '../helpers/synth-weights.ts';
import { freePort } from '../helpers/serve-child.ts';

test('serve: the staged tree prints tt-model\'s ready text once, serves /ready, exits 0 on SIGTERM', { timeout: 600_000 }, async (t) => {
  assert.ok(fs.existsSync(sidecarBinary()), `${sidecarBinary()} is not built; run npm run build:sidecar`);
  // tt-model's tt-dit-server kind waits for this text in the container log (tt-model.yaml's kind).
  const readyLine = KINDS[(parse(readText('tt-model.yaml')) as { kind: string }).kind]!.readyLine;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-serve-'));
  t.after(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const dest = path.join(tmp, 'rfdetr');
  const staged = spawnSync('bash', [path.join(packageRoot, 'scripts/container-build.sh'), '--no-install', '--dest', dest], { cwd: packageRoot, encoding: 'utf8' });
  assert.equal(staged.status, 0, staged.stderr);

  // RFDETR_FROM_SOURCE cleared: the staged tree runs its compiled/ as in the image, whatever the caller's environment.
  const env = { ...process.env, HF_HOME: path.join(tmp, 'hf'), HF_HUB_OFFLINE: '1', RFDETR_SIDECAR: '', RFDETR_FROM_SOURCE: '' };
  const weights = await synthWeights();

  const port = await freePort();
  const child = spawn(path.join(dest, 'bin/rfdetr'), ['serve', '--host', '127.0.0.1', '--port', String(port), '--weights', weights, '--engine', 'cpu', '--threads', '2'], { env });
  let log = '';
  child.stdout.on('data', (d) => { log += d; });
  child.stderr.on('data', (d) => { log += d; });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  t.after(() => { if (child.exitCode === null) child.kill('SIGKILL'); });

  // Each chunk of output is checked as it arrives; an exit first is a failure (the test's timeout ends a hang).
  await new Promise<void>((resolve, reject) => {
    const check = () => void (log.includes(readyLine) && resolve());
    child.stdout.on('data', check);
    child.stderr.on('data', check);
    child.on('exit', (code, signal) => reject(new Error(`rfdetr serve exited (${code ?? signal}) before printing ${readyLine}:\n${log.slice(-3000)}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  assert.equal((await fetch(base + ROUTES.readiness)).status, 200, 'the ready line printed but /ready is not 200');
  assert.equal((await fetch(base + ROUTES.liveness)).status, 200);
  const health = await (await fetch(base + ROUTES.health)).json() as { status: string };
  assert.equal(health.status, 'ok');
  const hc = spawnSync(process.execPath, [path.join(dest, 'scripts/healthcheck.mjs')], { encoding: 'utf8', env: { ...env, RFDETR_HEALTHCHECK_URL: base + ROUTES.readiness } });
  assert.equal(hc.status, 0, hc.stderr);

  child.kill('SIGTERM');
  const code = await Promise.race([exited, new Promise<string>((r) => setTimeout(() => r('timeout'), 60_000))]);
  assert.equal(code, 0, `SIGTERM should drain and exit 0:\n${log.slice(-3000)}`);
  assert.equal(log.split(readyLine).length - 1, 1, 'the ready line is printed exactly once');
});
