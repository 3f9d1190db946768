// The engine queue's cost-aware fair share on its own, on a clock the test moves: the next forward goes to the
// waiting client that has had the least engine time (not the fewest turns), a client back from idle banks no
// credit, and a large frame is handed only to an idle engine so a small request never waits behind its transfer.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { EngineQueue, PIPELINE_MAX_FRAME_BYTES } from '../../src/http/engine-queue.ts';
import { FairShare } from '../../src/http/fair-share.ts';
import { decodeCharge } from '../../src/http/frame-detector.ts';
import type { InferInput, InferResult } from '../../src/sidecar/backend.ts';
import { FakeBackend } from './helpers.ts';

const none = new AbortController().signal;
const turn = () => new Promise<void>((r) => setImmediate(r));
/** A run's options: a deadline a minute off on the (scripted) clock, never reached in these tests. */
const opts = (client: string) => ({ signal: none, deadlineAt: performance.now() + 60_000, deadlineMs: 60_000, client });

/** A backend whose forwards end only when the test says, on a performance.now() the test moves. */
function scripted(t: TestContext) {
  let now = 1000;
  t.mock.method(performance, 'now', () => now);
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const b = new FakeBackend();
  const inFlight: Array<{ tag: string; end: () => void }> = [];
  const started: string[] = [];
  b.infer = (input: InferInput) => new Promise<InferResult>((resolve) => {
    const tag = (input as unknown as { tag: string }).tag;
    started.push(tag);
    inFlight.push({ tag, end: () => resolve({ outputs: {}, preprocessMs: 0, forwardMs: 0, transferMs: 0 }) });
  });
  return {
    b, started, inFlight,
    /** The oldest forward in flight takes `ms` of engine time, then ends. */
    async finish(ms: number) {
      now += ms;
      inFlight.shift()!.end();
      await turn();
    },
  };
}

const small = (tag: string) => ({ pixelValues: new Float32Array(1), tag }) as unknown as InferInput;
const large = (tag: string) => ({ image: { width: 2400, height: 2400, data: new Uint8Array(2400 * 2400 * 3) }, tag }) as unknown as InferInput;

test('engine queue: a client whose forwards cost 6x less gets 6 forwards per forward of the other (not one each)', async (t) => {
  const s = scripted(t);
  const q = new EngineQueue(s.b, 1);
  const cost: Record<string, number> = { a: 30, b: 5 };
  const run = (client: string, n: number) => Array.from({ length: n }, (_, i) => q.run(small(`${client}${i + 1}`), opts(client)));
  const jobs = [...run('a', 3), ...run('b', 14)];
  while (s.inFlight.length > 0) await s.finish(cost[s.inFlight[0]!.tag[0]!]!);
  await Promise.all(jobs);
  // a1 first (both at 0, a waited longest); then b until its 6 × 5 ms equal a's 30 ms; on a tie the one served
  // longest ago goes. Turn-taking would have given a1 b1 a2 b2 a3 b3 …
  assert.deepEqual(s.started.slice(0, 15), ['a1', 'b1', 'b2', 'b3', 'b4', 'b5', 'b6', 'a2', 'b7', 'b8', 'b9', 'b10', 'b11', 'b12', 'a3']);
});

test('engine queue: a client back from idle starts level with the busy one, banking no credit for its idle time', async (t) => {
  const s = scripted(t);
  const q = new EngineQueue(s.b, 1);
  const job = (tag: string, client: string) => q.run(small(tag), opts(client));
  const jobs = [job('b0', 'b'), ...Array.from({ length: 12 }, (_, i) => job(`a${i + 1}`, 'a'))];
  // b's one forward, then a alone for eight forwards: a has had 80 ms of engine time more than b.
  for (let i = 0; i < 9; i++) await s.finish(10);
  assert.deepEqual(s.started.slice(0, 9), ['b0', 'a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7', 'a8']);
  jobs.push(...['b1', 'b2', 'b3'].map((tag) => job(tag, 'b')));
  while (s.inFlight.length > 0) await s.finish(10);
  await Promise.all(jobs);
  // Back at a's clock, b takes turns with a (equal costs) instead of running its three ahead of a's backlog.
  assert.deepEqual(s.started.slice(9, 15), ['a9', 'b1', 'a10', 'b2', 'a11', 'b3']);
});

test('engine queue: a large frame is handed over only to an idle engine; a small one behind it is not held back', async (t) => {
  const s = scripted(t);
  const q = new EngineQueue(s.b, 2);
  assert.ok(2400 * 2400 * 3 > PIPELINE_MAX_FRAME_BYTES);
  const jobs = [q.run(large('a1'), opts('a')), q.run(large('a2'), opts('a'))];
  await turn();
  assert.deepEqual(s.started, ['a1'], 'a2 is large: it waits for the engine to be idle instead of queueing behind a1 in the sidecar');
  jobs.push(q.run(small('b1'), opts('b')), q.run(small('b2'), opts('b')));
  await turn();
  assert.deepEqual(s.started, ['a1', 'b1'], 'b1 (small, b has had no engine time) goes into the second slot at once');
  await s.finish(100); // a1: a has had 100 ms
  assert.deepEqual(s.started, ['a1', 'b1', 'b2'], 'b2 is picked before a2 (b is behind a), and it is small');
  await s.finish(5);
  assert.deepEqual(s.started, ['a1', 'b1', 'b2'], 'a2 still waits: b2 is in flight');
  await s.finish(5);
  assert.deepEqual(s.started, ['a1', 'b1', 'b2', 'a2']);
  await s.finish(100);
  await Promise.all(jobs);
  // With one client, large frames are simply served one at a time, in order.
  const solo = [q.run(large('c1'), opts('c')), q.run(large('c2'), opts('c'))];
  await turn();
  assert.deepEqual(s.started.slice(4), ['c1']);
  await s.finish(10);
  await s.finish(10);
  await Promise.all(solo);
  assert.deepEqual(s.started.slice(4), ['c1', 'c2']);
});

test('engine queue: work charged outside the engine (a parse, a decode) counts against the client\'s share', async (t) => {
  const s = scripted(t);
  const q = new EngineQueue(s.b, 1);
  const run = (client: string, n: number) => Array.from({ length: n }, (_, i) => q.run(small(`${client}${i + 1}`), opts(client)));
  const jobs = [...run('a', 2), ...run('b', 5)];
  q.charge('a', 30); // a's images took 30 ms of the cores to decode
  q.charge('b', -5); // nothing: a charge is never a credit
  while (s.inFlight.length > 0) await s.finish(10);
  await Promise.all(jobs);
  // a1 went first (both at 0); with its 30 ms and its 10 ms forward, a waits until b's forwards reach 40 ms.
  assert.deepEqual(s.started, ['a1', 'b1', 'b2', 'b3', 'b4', 'a2', 'b5']);
});

test('a decode is charged its time, at most what its pixels cost a free core (5 ms + 4 ns per pixel)', () => {
  // A 640×480 decode that waited for the engine's cores (--decode-nice) costs the client what its pixels do.
  assert.equal(decodeCharge(281, { width: 640, height: 480 }), 5 + 4e-6 * 640 * 480);
  assert.equal(decodeCharge(3, { width: 640, height: 480 }), 3);
  assert.equal(decodeCharge(2000, { width: 8192, height: 8192 }), 5 + 4e-6 * 8192 * 8192);
  assert.equal(decodeCharge(50, undefined), 50, 'no header read: its time');
});

test('engine queue: a file the sidecar decodes counts as its bytes, not its pixels, for the large-frame rule', async (t) => {
  const s = scripted(t);
  const q = new EngineQueue(s.b, 2);
  // 2400² declared (17 MB of pixels) in a small file: pipelined; a file past the limit: only to an idle engine.
  const encoded = (tag: string, bytes: number) => ({ encoded: { format: 'png', width: 2400, height: 2400, bytes: new Uint8Array(bytes) }, tag }) as unknown as InferInput;
  const jobs = [q.run(small('a1'), opts('a')), q.run(encoded('a2', 1 << 20), opts('a')), q.run(encoded('a3', PIPELINE_MAX_FRAME_BYTES + 1), opts('a'))];
  await turn();
  assert.deepEqual(s.started, ['a1', 'a2'], 'a2 is a 1 MiB frame: it goes into the second slot; a3 waits for the engine to be idle');
  await s.finish(5);
  assert.deepEqual(s.started, ['a1', 'a2'], 'a3 still waits: a2 is in flight');
  await s.finish(5);
  assert.deepEqual(s.started, ['a1', 'a2', 'a3']);
  await s.finish(5);
  await Promise.all(jobs);
});

test('engine queues of several models share one fair share: engine time on model A loses a tie on model B', async (t) => {
  // One clock the test moves, two models' backends (each its own sidecar) and queues sharing one FairShare.
  const a = scripted(t);
  const b = new FakeBackend();
  const startedB: string[] = [];
  const inFlightB: Array<() => void> = [];
  b.infer = (input: InferInput) => new Promise<InferResult>((resolve) => {
    startedB.push((input as unknown as { tag: string }).tag);
    inFlightB.push(() => resolve({ outputs: {}, preprocessMs: 0, forwardMs: 0, transferMs: 0 }));
  });
  const share = new FairShare();
  const qa = new EngineQueue(a.b, 1, share);
  const qb = new EngineQueue(b, 1, share);
  // w holds model B's engine; meanwhile x has a 400 ms forward on model A (w is active, so x's time is not
  // forgiven as idle time when x's work ends).
  const w = qb.run(small('w1'), opts('w'));
  const x1 = qa.run(small('x1'), opts('x'));
  await turn();
  await a.finish(400);
  await x1;
  assert.ok(share.of('x') >= 400, `x's 400 ms on model A is on the shared clock (${share.of('x')} ms)`);
  // x then y (never served) wait for model B; x asked first, but it has had more engine time on the same cores.
  const jobs = [qb.run(small('x2'), opts('x')), qb.run(small('y1'), opts('y'))];
  await turn();
  while (inFlightB.length > 0) {
    inFlightB.shift()!();
    await turn();
  }
  await Promise.all([w, ...jobs]);
  assert.deepEqual(startedB, ['w1', 'y1', 'x2'], 'a per-model clock would have x2 first: x has had no time on model B and asked first');
});
