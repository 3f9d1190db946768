// The supervisor and client against a scripted fake sidecar (test/sidecar/fake-sidecar.ts) on real Unix sockets.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, existsSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { createBackend, type SidecarBackend, type SidecarBackendOptions } from '../../src/sidecar/index.ts';
import type { BackendState } from '../../src/sidecar/backend.ts';
import { RfdetrError, isRfdetrError } from '../../src/errors.ts';
import { createLogger } from '../../src/log.ts';
import { rampPixels } from './pixels.ts';
import { encodeFrame } from '../../src/protocol/codec.ts';
import { waitFor } from '../helpers/wait-for.ts';

const fakePath = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fake-sidecar.ts');

function fake(t: { after: (fn: () => unknown) => void }, scenario: string, extra: Partial<SidecarBackendOptions> = {}, env: Record<string, string> = {}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-fake-'));
  const logs: string[] = [];
  const logger = createLogger('debug', (lvl, m, f) => logs.push(`${lvl} ${m}${f ? ' ' + JSON.stringify(f) : ''}`));
  const b = createBackend({
    engine: 'fake', weightsDir: dir,
    command: { file: process.execPath, args: ['--import', 'tsx', fakePath] },
    env: { FAKE_SCENARIO: scenario, FAKE_COUNTER: path.join(dir, 'counter'), ...env },
    logger,
    startupTimeoutMs: 20_000, pingIntervalMs: 1_000, restart: { initialDelayMs: 20, maxDelayMs: 200 },
    ...extra,
  });
  t.after(() => {
    b.destroy();
    rmSync(dir, { recursive: true, force: true });
  });
  return { b, logs, dir };
}

function waitState(b: SidecarBackend, want: BackendState, timeoutMs = 20_000): Promise<void> {
  if (b.state === want) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { off(); reject(new Error(`state stayed ${b.state}, wanted ${want}`)); }, timeoutMs);
    const off = b.onStateChange((s) => {
      if (s === want) { clearTimeout(timer); off(); resolve(); }
    });
  });
}

/** Resolves once the fake sidecar has logged receiving an infer (its stderr, logged by the supervisor). */
function inferReceived(logs: string[], n = 1): Promise<true> {
  return waitFor(`${n} infer(s) received by the fake sidecar`, () => logs.filter((l) => /fake-sidecar: infer \d+ received/.test(l)).length >= n);
}

async function rejectsWith(p: Promise<unknown>, code: string): Promise<RfdetrError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof RfdetrError, `expected RfdetrError ${code}, got ${String(e)}`);
    assert.equal(e.code, code, e.message);
    return e;
  }
  assert.fail(`expected a rejection with ${code}`);
}

function checkEcho(px: Float32Array, { outputs }: { outputs: Record<string, Float32Array> }) {
  const r = { logits: outputs.logits!, predBoxes: outputs.pred_boxes! };
  assert.deepEqual(Object.keys(outputs), ['logits', 'pred_boxes']);
  assert.equal(r.logits.length, 300 * 91);
  assert.equal(r.predBoxes.length, 300 * 4);
  for (let i = 0; i < r.logits.length; i += 101) assert.equal(r.logits[i], Math.fround(px[i]! + 1));
  for (let i = 0; i < r.predBoxes.length; i++) assert.equal(r.predBoxes[i], Math.fround(px[27300 + i]! * 0.5));
}

test('fake sidecar: ready, hello info, infer echo, close via SIGTERM', async (t) => {
  const { b, logs } = fake(t, 'ok');
  await b.ready();
  assert.equal(b.state, 'ready');
  assert.equal(b.info?.engine, 'fake');
  assert.equal(b.info?.sidecarVersion, '0.0.0-fake');
  assert.deepEqual(b.info?.inputShape, [3, 560, 560]);
  assert.equal(b.info?.labels.length, 91);
  const px = rampPixels();
  const t0 = performance.now();
  const r = await b.infer({ pixelValues: px });
  const callMs = performance.now() - t0;
  checkEcho(px, r);
  assert.equal(r.forwardMs, 0.25);
  // The transfer is the client's round trip less the sidecar's own times (0.25 ms forward here), so it fits in
  // the call that contains it: both are read from the same monotonic clock. Fails for a transfer in other units
  // or timed from before the request; that the sidecar's times are subtracted is decoders.test.ts's (transferMs
  // 0 beside a minute-long decode).
  assert.ok(r.transferMs <= Math.max(0, callMs - r.forwardMs), `transfer ${r.transferMs} ms, but the whole call took ${callMs} ms with a ${r.forwardMs} ms forward`);
  const socketDir = path.dirname(b.socketPath);
  await b.close();
  assert.equal(b.state, 'stopped');
  assert.ok(logs.some((l) => l.includes('engine state: starting -> ready')), logs.join('\n'));
  assert.ok(logs.some((l) => l.includes('sidecar stopped') && l.includes('"how":"SIGTERM"')), logs.join('\n'));
  assert.equal(existsSync(socketDir), false, 'the temp socket dir is removed');
  await rejectsWith(b.infer({ pixelValues: px }), 'E_CLOSED');
});

test('fake sidecar: a crash mid-request rejects every pending request on the death, then it restarts', async (t) => {
  const { b, dir } = fake(t, 'crash-on-infer,ok');
  await b.ready();
  const firstPid = b.pid;
  const px = rampPixels();
  // How many sidecars had been started when each request failed: the death itself must fail them, before a
  // replacement is started (neither a deadline nor the restart answers them).
  const startsAtRejection: string[] = [];
  const failed = (p: Promise<unknown>) => p.catch((e: unknown) => {
    startsAtRejection.push(readFileSync(path.join(dir, 'counter'), 'utf8'));
    throw e;
  });
  const results = await Promise.allSettled([failed(b.infer({ pixelValues: px })), failed(b.infer({ pixelValues: px }))]);
  assert.deepEqual(startsAtRejection, ['1', '1'], 'both requests failed before a replacement sidecar was started');
  for (const r of results) {
    assert.equal(r.status, 'rejected');
    const e = (r as PromiseRejectedResult).reason as RfdetrError;
    assert.equal(e.code, 'E_SIDECAR_EXITED', e.message);
    assert.equal(e.details?.exitCode, 3);
    assert.match(e.message, /exited with code 3/);
    assert.ok((e.details?.stderrTail as string[]).some((l) => l.includes('crashing on purpose')), e.message);
  }
  await waitState(b, 'ready');
  assert.notEqual(b.pid, firstPid);
  assert.equal(b.restarts, 1);
  checkEcho(px, await b.infer({ pixelValues: px }));
});

test('fake sidecar: a hang gives a deadline error, missed pings kill it, the restart serves', async (t) => {
  // The restarted 'ok' fake must answer every ping within the deadline: 500 ms, not 150, so that a loaded machine's
  // scheduling delays (other test files run beside this one) cannot make it miss two in a row and be killed again.
  const { b, logs } = fake(t, 'hang,ok', { pingIntervalMs: 100, pingTimeoutMs: 500, maxMissedPings: 2 });
  await b.ready();
  const firstPid = b.pid!;
  const e = await rejectsWith(b.infer({ pixelValues: rampPixels() }, { deadlineMs: 300 }), 'E_DEADLINE');
  assert.match(e.message, /within 300 ms/);
  await waitState(b, 'restarting', 5000);
  await waitState(b, 'ready');
  assert.notEqual(b.pid, firstPid);
  assert.ok(logs.some((l) => l.includes('missed 2 pings')), logs.join('\n'));
  const px = rampPixels();
  checkEcho(px, await b.infer({ pixelValues: px }));
});

/** Holds this process's event loop for `ms` (what a long parse or a CPU-starved server does to it). */
function holdLoop(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) { /* spin */ }
}

test('fake sidecar: pings answered while this server\'s own loop is held past their deadline are not missed', async (t) => {
  // Each hold is 4x the ping deadline with one loop turn between: the sidecar's answer is in the socket when the
  // deadline timer runs, before the poll phase reads it. Counting that as a miss made a CPU-starved server call
  // a healthy sidecar unresponsive (bench/redteam, a legitimate request answered 503). The deadline is 300 ms, not
  // 100, so that the fake itself (a process the scheduler may keep waiting on a loaded machine) answers in time.
  const { b, logs } = fake(t, 'ok', { pingIntervalMs: 50, pingTimeoutMs: 300, maxMissedPings: 1000 }, { FAKE_LOG_PINGS: '1' });
  await b.ready();
  const states: BackendState[] = [];
  b.onStateChange((s) => states.push(s));
  const answered = () => logs.filter((l) => /fake-sidecar: ping \d+ answered/.test(l)).length;
  const first = answered();
  let holds = 0;
  while (answered() < first + 5) {
    holdLoop(1_200);
    holds++;
    await new Promise((r) => setImmediate(r));
  }
  assert.deepEqual(states, [], `state changes while the loop was held ${holds} times`);
  assert.ok(!logs.some((l) => l.includes('missed a ping')), logs.filter((l) => /ping/.test(l)).join('\n'));
  assert.equal(b.state, 'ready');
});

test('fake sidecar: a sidecar answering infers but not pings stays ready; once it answers nothing, misses kill it', async (t) => {
  const { b, logs } = fake(t, 'mute-pings,ok', { pingIntervalMs: 50, pingTimeoutMs: 500, maxMissedPings: 3 }, { FAKE_LOG_PINGS: '1' });
  await b.ready();
  const firstPid = b.pid!;
  const states: BackendState[] = [];
  b.onStateChange((s) => states.push(s));
  const unanswered = () => logs.filter((l) => /fake-sidecar: ping \d+ not answered/.test(l)).length;
  // Busy: back-to-back infers answered while four pings go unanswered past their deadline.
  const px = rampPixels();
  let answered = 0;
  while (unanswered() < 4 && states.length === 0) {
    const r = await b.infer({ pixelValues: px }, { deadlineMs: 5_000 }).catch((e: Error) => e);
    if (!(r instanceof Error)) answered++;
  }
  assert.deepEqual(states, [], `state changes while infers were answered (${answered} of them)`);
  assert.ok(!logs.some((l) => l.includes('missed a ping')), logs.filter((l) => /ping/.test(l)).join('\n'));
  // Nothing in flight and no answers: the misses count, and the third kills it.
  await waitState(b, 'restarting');
  assert.deepEqual(states.slice(0, 2), ['unresponsive', 'restarting']);
  assert.ok(logs.some((l) => l.includes('missed 3 pings')), logs.join('\n'));
  await waitState(b, 'ready');
  assert.notEqual(b.pid, firstPid);
});

test('fake sidecar: a ping queued behind frames the sidecar is still reading is not missed; a sidecar that reads nothing is', async (t) => {
  const { b, logs } = fake(t, 'slow-reader', { pingIntervalMs: 200, pingTimeoutMs: 1000, maxMissedPings: 2 });
  await b.ready();
  const firstPid = b.pid!;
  const states: BackendState[] = [];
  b.onStateChange((s) => states.push(s));
  // Four 3.8 MB frames at the fake's ~6 MB/s: the first ping waits unwritten ~2.5 s, 2.5 times its deadline, and
  // no reply comes meanwhile (the fake holds them until a ping reaches it). The deadline is 1 s, not 100 ms, so
  // that a loaded machine's scheduling delays cannot make the fake miss one once its backlog is read.
  const px = rampPixels();
  const results = await Promise.all(Array.from({ length: 4 }, () => b.infer({ pixelValues: px }, { deadlineMs: 60_000 }).catch((e: Error) => e)));
  assert.deepEqual(results.filter((r) => r instanceof Error).map(String), []);
  assert.deepEqual(states, [], 'no state change while the sidecar read the backlog');
  assert.ok(!logs.some((l) => l.includes('missed a ping')), logs.filter((l) => /ping/.test(l)).join('\n'));
  assert.ok(logs.some((l) => l.includes('the ping waited behind frames the sidecar was reading')), 'the pings did wait unwritten');
  // The next start reads but answers no ping: nothing was queued, so the misses still count and kill it.
  b.destroy();
  const second = fake(t, 'mute-pings', { pingIntervalMs: 50, pingTimeoutMs: 100, maxMissedPings: 2 });
  await second.b.ready();
  await waitState(second.b, 'restarting');
  assert.ok(second.logs.some((l) => l.includes('missed 2 pings')), second.logs.join('\n'));
  assert.notEqual(second.b.pid, firstPid);
});

test('fake sidecar: a garbage frame is a protocol error, the sidecar is replaced', async (t) => {
  const { b } = fake(t, 'garbage,ok');
  await b.ready();
  const e = await rejectsWith(b.infer({ pixelValues: rampPixels() }), 'E_PROTOCOL');
  assert.match(e.message, /bad frame/);
  await waitState(b, 'ready');
  assert.equal(b.restarts, 1);
  const px = rampPixels();
  checkEcho(px, await b.infer({ pixelValues: px }));
});

test('fake sidecar: a protocol version mismatch fails at once, naming both versions', async (t) => {
  const { b } = fake(t, 'bad-version');
  await rejectsWith(b.ready(), 'E_VERSION_MISMATCH');
  assert.equal(b.state, 'failed');
  assert.match(b.failure!.message, /protocol version 99, this client speaks versions 4, 3, 2/);
  assert.equal(b.restarts, 0, 'restarting cannot fix a version mismatch');
  await rejectsWith(b.infer({ pixelValues: rampPixels() }), 'E_VERSION_MISMATCH');
});

test('fake sidecar: the hello names the variant loaded; an older sidecar (protocol 2, no variant) still serves, variant null', async (t) => {
  const { b } = fake(t, 'ok', {}, { FAKE_VARIANT: 'large_deprecated' });
  await b.ready();
  assert.equal(b.info?.protocolVersion, 4);
  assert.equal(b.info?.variant, 'large_deprecated');
  const old = fake(t, 'old-hello').b;
  await old.ready();
  assert.equal(old.info?.protocolVersion, 2);
  assert.equal(old.info?.variant, null);
  const px = rampPixels();
  checkEcho(px, await old.infer({ pixelValues: px }));
});

test('fake sidecar: a version-4 hello\'s task, outputs and engine facts reach the info; a version-3 sidecar maps to detect with its two outputs, facts unknown', async (t) => {
  const { b } = fake(t, 'ok');
  await b.ready();
  assert.deepEqual(
    { task: b.info?.task, outputs: b.info?.outputs, precision: b.info?.precision, precisions: b.info?.precisions, hostCores: b.info?.hostCores },
    { task: 'detect', outputs: [{ name: 'logits', dtype: 'f32', shape: [300, 91] }, { name: 'pred_boxes', dtype: 'f32', shape: [300, 4] }], precision: 'fp32', precisions: ['fp32'], hostCores: true },
  );
  const v3 = fake(t, 'v3-hello').b;
  await v3.ready();
  assert.equal(v3.info?.protocolVersion, 3);
  assert.deepEqual(
    { task: v3.info?.task, outputs: v3.info?.outputs, precision: v3.info?.precision, precisions: v3.info?.precisions, hostCores: v3.info?.hostCores },
    { task: 'detect', outputs: [{ name: 'logits', dtype: 'f32', shape: [300, 91] }, { name: 'pred_boxes', dtype: 'f32', shape: [300, 4] }], precision: null, precisions: null, hostCores: null },
  );
  const px = rampPixels();
  checkEcho(px, await v3.infer({ pixelValues: px }));
});

test('fake sidecar: a task this server has no postprocess for is refused at hello, naming it and the known tasks, without restarts', async (t) => {
  const { b } = fake(t, 'classify-hello');
  await rejectsWith(b.ready(), 'E_PROTOCOL');
  assert.equal(b.state, 'failed');
  assert.match(b.failure!.message, /serves the task 'classify', which this server has no postprocess for \(it knows detect, segment\)/);
  assert.equal(b.restarts, 0, 'restarting the same sidecar cannot fix it');
});

test('fake sidecar: an infer reply whose outputs are not the hello\'s, in its order, is a protocol error', async (t) => {
  const { b } = fake(t, 'swapped-outputs');
  await b.ready();
  const err = await b.infer({ pixelValues: rampPixels() }).then(() => undefined, (e: RfdetrError) => e);
  assert.equal(err?.code, 'E_PROTOCOL');
  assert.match(err!.message, /infer reply carries the outputs pred_boxes, logits; the hello declared logits \[300,91\], pred_boxes \[300,4\], in that order/);
});

test('fake sidecar: a first frame that is not a hello is a protocol error and a restart', async (t) => {
  const { b, logs } = fake(t, 'bad-hello,ok');
  await waitState(b, 'ready');
  assert.equal(b.restarts, 1);
  assert.ok(logs.some((l) => l.includes('engine state: starting -> restarting') && l.includes('must be its hello')), logs.join('\n'));
});

test('fake sidecar: more than maxCrashes deaths in the window → failed, with backoff and the stderr reason', async (t) => {
  const { b, logs } = fake(t, 'crash-at-start', { restart: { initialDelayMs: 30, maxDelayMs: 1000, maxCrashes: 2, windowMs: 60_000 } });
  await rejectsWith(b.ready(), 'E_SIDECAR_FAILED');
  assert.equal(b.state, 'failed');
  assert.match(b.failure!.message, /crashed 3 times in the last 60 s; not restarting/);
  assert.match(b.failure!.message, /cannot open device 0/);
  assert.match(b.failure!.message, /exited with code 3 before it was ready/);
  assert.equal(b.failureReason, b.failure!.message);
  assert.equal(b.restarts, 2);
  const backoffs = logs.filter((l) => l.includes('-> restarting')).map((l) => JSON.parse(l.slice(l.indexOf('{'))).in_ms as number);
  assert.deepEqual(backoffs, [30, 60], 'exponential backoff');
  assert.ok(logs.some((l) => l.startsWith('error engine state: restarting -> failed')), logs.join('\n'));
  await rejectsWith(b.infer({ pixelValues: rampPixels() }), 'E_SIDECAR_FAILED');
});

test('fake sidecar: no READY within the startup deadline → killed and counted as a crash', async (t) => {
  const { b } = fake(t, 'no-ready', { startupTimeoutMs: 1500, restart: { maxCrashes: 0 } });
  await rejectsWith(b.ready(), 'E_SIDECAR_FAILED');
  assert.match(b.failure!.message, /no READY line within 1500 ms/);
});

test('fake sidecar: close() escalates SIGTERM → SIGKILL when ignored', async (t) => {
  const { b, logs } = fake(t, 'stubborn', { closeTimeouts: { termMs: 300, killMs: 2000 } });
  await b.ready();
  await b.close();
  assert.equal(b.state, 'stopped');
  // In order: the sidecar got SIGTERM (and said it ignores it), then the supervisor gave up on it and killed it.
  const ignoring = logs.findIndex((l) => l.includes('fake-sidecar: ignoring SIGTERM'));
  const gaveUp = logs.findIndex((l) => l.includes('ignored SIGTERM for 300 ms; sending SIGKILL'));
  assert.ok(ignoring >= 0 && gaveUp > ignoring, logs.join('\n'));
  assert.ok(logs.some((l) => l.includes('sending SIGKILL')), logs.join('\n'));
  assert.ok(logs.some((l) => l.includes('"how":"SIGKILL"') && l.includes('"signal":"SIGKILL"')), logs.join('\n'));
});

test('fake sidecar: close() drains in-flight requests; destroy(err) rejects at once', { timeout: 60_000 }, async (t) => {
  const { b, logs } = fake(t, 'held');
  await b.ready();
  const px = rampPixels();
  const inflight = b.infer({ pixelValues: px });
  await inferReceived(logs);
  // The answer is held in the sidecar until the SIGUSR2 below, sent once close() says it waits for it.
  const closing = b.close();
  await rejectsWith(b.infer({ pixelValues: px }), 'E_CLOSED');
  await waitFor('close() to wait for the request in flight', () => logs.some((l) => l.includes('close: waiting for 1 request(s) in flight')), 10_000);
  process.kill(b.pid!, 'SIGUSR2');
  checkEcho(px, await inflight);
  await closing;
  assert.equal(b.state, 'stopped');

  // This reply never comes (no SIGUSR2): a destroy() that waited for it would run into the test's timeout.
  const { b: b2, logs: logs2 } = fake(t, 'held');
  await b2.ready();
  const p = b2.infer({ pixelValues: px });
  await inferReceived(logs2);
  b2.destroy(new RfdetrError('E_DRAINING', 'test is over'));
  const e = await rejectsWith(p, 'E_DRAINING');
  assert.equal(e.message, 'test is over');
  assert.equal(b2.state, 'stopped');
});

test('fake sidecar: an aborted request rejects E_ABORTED and the connection keeps serving', async (t) => {
  const { b, logs } = fake(t, 'held');
  await b.ready();
  const ac = new AbortController();
  const px = rampPixels();
  const p = b.infer({ pixelValues: px }, { signal: ac.signal });
  await inferReceived(logs); // aborted while the sidecar holds its answer, not before it was sent
  ac.abort();
  await rejectsWith(p, 'E_ABORTED');
  process.kill(b.pid!, 'SIGUSR2'); // the aborted request's answer arrives late, then every answer comes at once
  checkEcho(px, await b.infer({ pixelValues: px }));
  assert.equal(b.state, 'ready');
});

test('external mode: connects without spawning, reconnects with backoff, close() leaves the sidecar running', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-ext-'));
  const socketPath = path.join(dir, 's.sock');
  const startFake = async () => {
    const p = execa(process.execPath, ['--import', 'tsx', fakePath, '--socket', socketPath], { reject: false, buffer: false, stdout: 'pipe', stderr: 'ignore' });
    await new Promise<void>((resolve) => p.stdout!.once('data', () => resolve()));
    return { p };  // wrapped: returning the ResultPromise itself would wait for the process to exit
  };
  let side = (await startFake()).p;
  const logs: string[] = [];
  const b = createBackend({ external: true, socketPath, logger: createLogger('debug', (_, m) => logs.push(m)), restart: { initialDelayMs: 50, maxDelayMs: 200, maxCrashes: 50 } });
  t.after(async () => {
    b.destroy();
    side.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  await b.ready();
  assert.equal(b.pid, undefined, 'nothing spawned');
  const px = rampPixels();
  checkEcho(px, await b.infer({ pixelValues: px }));
  side.kill('SIGKILL');
  await side;
  assert.equal(b.state === 'ready' || b.state === 'restarting', true);
  await waitState(b, 'restarting', 5000);
  side = (await startFake()).p;
  await waitState(b, 'ready', 10_000);
  checkEcho(px, await b.infer({ pixelValues: px }));
  await b.close();
  assert.equal(b.state, 'stopped');
  assert.doesNotThrow(() => process.kill(side.pid!, 0), 'the external sidecar keeps running after close()');
  assert.ok(isRfdetrError(await b.infer({ pixelValues: px }).catch((e: unknown) => e), 'E_CLOSED'));
});

for (const [scenario, status, kind, said] of [
  ['exit-at-start', 1, 'startup failure', /engine 'fake' failed to start: config\.json: id2label is missing/],
  ['exit-usage', 2, 'usage error', /--engine 'nope' is not built into this sidecar/],
] as const) {
  test(`fake sidecar: exit status ${status} before READY (${kind}) fails at once with the sidecar's own message, no restart`, async (t) => {
    const states: string[] = [];
    const { b, dir } = fake(t, `${scenario},ok`, { restart: { initialDelayMs: 20, maxCrashes: 5 } });
    b.onStateChange((s) => states.push(s));
    const e = await rejectsWith(b.ready(), 'E_SIDECAR_FAILED');
    assert.match(e.message, new RegExp(`could not start \\(exit status ${status}, ${kind}; not restarted\\)`));
    assert.match(e.message, said);
    assert.doesNotMatch(e.message, /crashed|load_weights/, 'its own line, not a crash count or engine log lines');
    assert.equal(b.failureReason, e.message);
    assert.deepEqual(states, ['failed']);
    assert.equal(b.restarts, 0);
    assert.equal(readFileSync(path.join(dir, 'counter'), 'utf8'), '1', 'started exactly once');
  });
}

test('fake sidecar: a clean exit 0 while serving (a shutdown op from another client) is restarted and not counted as a crash', async (t) => {
  // maxCrashes 0: one crash would fail the backend, so reaching ready again proves the stop was not counted.
  const { b } = fake(t, 'ok', { restart: { initialDelayMs: 20, maxCrashes: 0 } });
  await b.ready();
  const firstPid = b.pid;
  assert.equal(b.failureReason, null);
  const restarting = waitState(b, 'restarting', 5000);
  const sock = net.createConnection(b.socketPath);
  sock.on('error', () => {});
  sock.write(encodeFrame({ kind: 'request', id: 7, op: 'shutdown' }));
  await restarting;
  assert.match(b.failureReason ?? '', /exited with code 0 while serving/);
  await waitState(b, 'ready');
  sock.destroy();
  assert.notEqual(b.pid, firstPid);
  assert.equal(b.restarts, 1);
  assert.equal(b.failureReason, null);
  const px = rampPixels();
  checkEcho(px, await b.infer({ pixelValues: px }));
});

test('fake sidecar: Hub credentials in this process are not passed into the sidecar\'s environment', async (t) => {
  const saved = { HF_TOKEN: process.env.HF_TOKEN, HUGGING_FACE_HUB_TOKEN: process.env.HUGGING_FACE_HUB_TOKEN };
  process.env.HF_TOKEN = 'hf_secret';
  process.env.HUGGING_FACE_HUB_TOKEN = 'hf_secret2';
  t.after(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
  const out = path.join(mkdtempSync(path.join(os.tmpdir(), 'rfdetr-env-')), 'env.json');
  t.after(() => rmSync(path.dirname(out), { recursive: true, force: true }));
  const { b } = fake(t, 'ok', {}, { FAKE_ENV_OUT: out });
  await b.ready();
  const names = JSON.parse(readFileSync(out, 'utf8')) as string[];
  assert.ok(names.includes('FAKE_SCENARIO') && names.includes('PATH'), 'the rest of the environment is there');
  assert.equal(names.includes('HF_TOKEN'), false);
  assert.equal(names.includes('HUGGING_FACE_HUB_TOKEN'), false);
});

test('supervisor: socket directories of processes that died without closing are removed by the next supervisor', async (t) => {
  // A supervisor in a child process, killed with SIGKILL once its sidecar is ready: nothing of ours runs to clean up.
  const script = `
    import { createBackend } from ${JSON.stringify(path.join(path.dirname(fakePath), '../../src/sidecar/index.ts'))};
    const b = createBackend({ engine: 'fake', weightsDir: '/nonexistent', command: { file: process.execPath, args: ['--import', 'tsx', ${JSON.stringify(fakePath)}] } });
    await b.ready();
    process.stdout.write(b.socketPath + '\\n');
    setInterval(() => {}, 1000);
  `;
  const child = execa(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { reject: false, buffer: false, stdout: 'pipe', stderr: 'inherit' });
  t.after(() => void child.kill('SIGKILL'));
  const socketPath = await new Promise<string>((resolve) => child.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim())));
  const dir = path.dirname(socketPath);
  assert.match(path.basename(dir), new RegExp(`^rfdetr-sidecar-${child.pid}-`));
  child.kill('SIGKILL');
  await child;
  // The orphaned sidecar notices its parent is gone and removes its socket; the directory stays behind.
  await waitFor('the orphaned sidecar to remove its socket', () => !existsSync(socketPath), 10_000);
  assert.equal(existsSync(dir), true, 'the directory was left behind');
  const { b } = fake(t, 'ok');
  assert.equal(existsSync(dir), false, 'the next supervisor removed the dead process\'s directory');
  assert.equal(existsSync(path.dirname(b.socketPath)), true, 'and kept its own');
});
