// `rfdetr serve --decode-nice N`: after a decode, every thread of the server but its main one (libuv's pool,
// the libvips workers the decode started) runs at the main thread's nice + N, while the main thread and every
// thread of the sidecar keep the main thread's; /info reports what was done. Read from /proc/PID/task/*/stat,
// the kernel's own record of each thread's nice value.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { sidecarBinary, testFixturesDir } from '../../src/config/paths.ts';
import { lowerDecodePriority, lowerMainPriority } from '../../src/image/decode-priority.ts';
import { skipOrFail } from '../helpers/skip.ts';
import { synthWeights } from '../helpers/synth-weights.ts';
import { startServe } from '../helpers/serve-child.ts';
import { autogroupOn, sidecarChildOf, threadsOf } from '../helpers/proc.ts';

/** The nice value of `pid`'s main thread. */
const mainNice = (pid: number) => threadsOf(pid).find((th) => th.tid === pid)!.nice;

/** The rfdetr-sidecar among `pid`'s children, asserted present. */
function sidecarOf(pid: number): number {
  const sidecar = sidecarChildOf(pid);
  assert.ok(sidecar !== undefined, `the server (pid ${pid}) has an rfdetr-sidecar child`);
  return sidecar;
}

test('lowerDecodePriority: 0 changes nothing; outside 0–19 is a RangeError naming the value', async () => {
  const before = threadsOf(process.pid).map((t) => t.nice);
  assert.deepEqual(await lowerDecodePriority(0), { delta: 0, nice: null, threads: 0, note: 'off (--decode-nice 0)' });
  assert.deepEqual(threadsOf(process.pid).map((t) => t.nice).slice(0, before.length), before);
  await assert.rejects(lowerDecodePriority(20), /Expected an integer 0–19 for the decode nice increment but received 20/);
  await assert.rejects(lowerDecodePriority(1.5), /but received 1\.5/);
});

test('serve --decode-nice 7: the server\'s helper threads (libvips workers included) at +7, its main thread and the sidecar\'s threads not', { timeout: 300_000 }, async (t) => {
  if (process.platform !== 'linux') return skipOrFail(t, 'per-thread nice values are read from Linux\'s /proc; run on Linux');
  assert.ok(fs.existsSync(sidecarBinary()), `${sidecarBinary()} is not built; run npm run build:sidecar`);
  const weights = await synthWeights();
  const { child, base, log: serveLog } = await startServe(t, ['--weights', weights, '--engine', 'cpu', '--threads', '2', '--decode-nice', '7', '--engine-nice', '0', '--server-nice', '0', '--log-level', 'warn']);

  // Decodes run on libuv's pool and start libvips's workers: several at once, so that more than one is needed.
  const image = fs.readFileSync(path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'input.png')).toString('base64');
  const statuses = await Promise.all(Array.from({ length: 3 }, () => fetch(`${base}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ image }) }).then((r) => r.status)));
  assert.deepEqual(statuses, [200, 200, 200], serveLog());

  const pid = child.pid!;
  const threads = threadsOf(pid);
  const main = threads.find((th) => th.tid === pid)!;
  const want = Math.min(19, main.nice + 7);
  const info = (await (await fetch(`${base}/info`)).json()) as { serving: { decode_nice: unknown } };
  const autogroup = autogroupOn();
  assert.deepEqual(info.serving.decode_nice, { delta: 7, nice: want, threads: (info.serving.decode_nice as { threads: number }).threads, ...(autogroup ? { autogroup: true } : {}) });
  const helpers = threads.filter((th) => th.tid !== pid);
  assert.ok(helpers.some((th) => th.comm === 'libvips worker'), `the decodes started libvips workers: ${JSON.stringify(helpers)}`);
  assert.deepEqual(helpers.filter((th) => th.nice !== want), [], `every helper thread at nice ${want}`);

  const engine = threadsOf(sidecarOf(pid));
  assert.ok(engine.length >= 2, `the sidecar runs its forward threads: ${JSON.stringify(engine)}`);
  assert.deepEqual(engine.filter((th) => th.nice !== main.nice), [], `every sidecar thread at the main thread's nice ${main.nice}`);
  assert.equal(main.nice, mainNice(process.pid), 'the main thread keeps the nice it was started with');
});

test('lowerMainPriority: 0 changes nothing; outside 0–19 is a RangeError naming the value', () => {
  const before = mainNice(process.pid);
  assert.deepEqual(lowerMainPriority(0), { delta: 0, nice: null, note: 'off (--server-nice 0)' });
  assert.equal(mainNice(process.pid), before);
  assert.throws(() => lowerMainPriority(20), /Expected an integer 0–19 for the server nice increment but received 20/);
  assert.throws(() => lowerMainPriority(-1), /but received -1/);
});

test('serve --server-nice 3: once the sidecar runs, the server\'s main thread at +3 and the sidecar\'s threads at the nice they started with; /info says so', { timeout: 300_000 }, async (t) => {
  if (process.platform !== 'linux') return skipOrFail(t, 'per-thread nice values are read from Linux\'s /proc; run on Linux');
  assert.ok(fs.existsSync(sidecarBinary()), `${sidecarBinary()} is not built; run npm run build:sidecar`);
  const weights = await synthWeights();
  const { child, base } = await startServe(t, ['--weights', weights, '--engine', 'cpu', '--threads', '2', '--server-nice', '3', '--engine-nice', '0', '--log-level', 'warn']);
  const started = mainNice(process.pid);  // what the server inherited
  const pid = child.pid!;
  const want = Math.min(19, started + 3);
  assert.equal(mainNice(pid), want, 'the server\'s main thread runs 3 nicer than it started');
  const info = (await (await fetch(`${base}/info`)).json()) as { serving: { server_nice: unknown } };
  assert.deepEqual(info.serving.server_nice, { delta: 3, nice: want });
  const engine = threadsOf(sidecarOf(pid));
  assert.ok(engine.length >= 2, `the sidecar runs its forward threads: ${JSON.stringify(engine)}`);
  assert.deepEqual(engine.filter((th) => th.nice !== started), [], `every sidecar thread at nice ${started}, as started`);
});
