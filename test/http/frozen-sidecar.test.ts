// A sidecar frozen with SIGSTOP answers no ping: /ready turns 503 at its first missed ping (not when the
// supervisor finally kills it) and 200 again once SIGCONT lets it answer, without a restart. The real test
// sidecar, short ping intervals set by options, and polling of /ready (no fixed sleeps).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { packageRoot } from '../../src/config/paths.ts';
import { createServer } from '../../src/http/server.ts';
import { createJsonLogger } from '../../src/http/log.ts';
import { createBackend } from '../../src/sidecar/index.ts';
import { waitFor } from '../helpers/wait-for.ts';

const testBinary = path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test');

const until = (what: string, check: () => Promise<boolean>) => waitFor(what, check, 20_000);

test('a frozen sidecar: /ready 503 after one missed ping, 200 again after SIGCONT, same process', async (t) => {
  assert.ok(existsSync(testBinary), `${testBinary} is not built: run npm install`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-frozen-'));
  const backend = createBackend({
    engine: 'test-echo', weightsDir: dir, command: { file: testBinary },
    // Killed only after 1000 misses: the test is about readiness, not the restart.
    pingIntervalMs: 50, pingTimeoutMs: 100, maxMissedPings: 1000,
  });
  const srv = createServer({ backend, logger: createJsonLogger('error', () => {}), defaultMetrics: false });
  t.after(async () => {
    backend.destroy();
    rmSync(dir, { recursive: true, force: true });
  });
  const { url } = await srv.listen('127.0.0.1', 0);
  await backend.ready(60_000);
  const ready = async () => (await fetch(`${url}/ready`)).status;
  assert.equal(await ready(), 200);
  const pid = backend.pid!;
  process.kill(pid, 'SIGSTOP');
  try {
    await until('/ready to turn 503', async () => (await ready()) === 503);
    const r = await fetch(`${url}/ready`);
    const body = (await r.json()) as { code: string; detail: string };
    assert.equal(body.code, 'E_STARTING');
    assert.match(body.detail, /not answering its liveness pings/);
    assert.equal(backend.state, 'unresponsive');
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  await until('/ready to turn 200 again', async () => (await ready()) === 200);
  assert.equal(backend.pid, pid, 'the same sidecar serves again: it was not restarted');
  assert.equal(backend.restarts, 0);
  await srv.drain(5_000);
});
