// The engine queue and the prep limiter on their own: order, one forward at a time, drop-before-forward on
// abort and deadline, busy-time accounting.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EngineQueue } from '../../src/http/engine-queue.ts';
import { Limiter } from '../../src/http/limiter.ts';
import { FakeBackend, waitFor } from './helpers.ts';

const px = (v: number) => ({ pixelValues: new Float32Array([v]) });
const far = () => performance.now() + 60_000;

test('engine queue: FIFO, never more than one forward at a time', async () => {
  const b = new FakeBackend();
  const seen: number[] = [];
  let concurrent = 0;
  let maxConcurrent = 0;
  b.infer = async (p) => {
    concurrent++;
    maxConcurrent = Math.max(maxConcurrent, concurrent);
    seen.push('pixelValues' in p ? p.pixelValues[0]! : -1);
    await new Promise((r) => setTimeout(r, 5));
    concurrent--;
    return { logits: new Float32Array(0), predBoxes: new Float32Array(0), preprocessMs: 0, forwardMs: 5, transferMs: 0 };
  };
  const q = new EngineQueue(b, 1);
  const signal = new AbortController().signal;
  const runs = await Promise.all([1, 2, 3, 4, 5].map((v) => q.run(px(v), { signal, deadlineAt: far(), deadlineMs: 60_000 })));
  assert.deepEqual(seen, [1, 2, 3, 4, 5]);
  assert.equal(maxConcurrent, 1);
  assert.ok(runs[4]!.queueMs >= runs[0]!.queueMs);
  assert.ok(q.busyMs() >= 20, `busy ${q.busyMs()}`);
  await q.idle();
});

test('engine queue: aborted and expired waiters are dropped without a forward; rejectWaiting empties the line', async () => {
  const b = new FakeBackend();
  const release = b.block();
  const q = new EngineQueue(b, 1);
  const none = new AbortController().signal;
  const first = q.run(px(1), { signal: none, deadlineAt: far(), deadlineMs: 60_000 });
  await waitFor(() => b.calls === 1, 'first dispatched');
  const ac = new AbortController();
  const aborted = q.run(px(2), { signal: ac.signal, deadlineAt: far(), deadlineMs: 60_000 });
  const expired = q.run(px(3), { signal: none, deadlineAt: performance.now() + 30, deadlineMs: 30 });
  const rejected = q.run(px(4), { signal: none, deadlineAt: far(), deadlineMs: 60_000 });
  assert.equal(q.depth, 3);
  ac.abort();
  await assert.rejects(aborted, (e: any) => e.code === 'E_ABORTED');
  await assert.rejects(expired, (e: any) => e.code === 'E_DEADLINE' && /waiting for the engine/.test(e.message));
  q.rejectWaiting(Object.assign(new Error('draining'), { code: 'X' }));
  await assert.rejects(rejected, /draining/);
  assert.equal(q.depth, 0);
  release();
  await first;
  await q.idle();
  assert.equal(b.calls, 1);
  assert.equal(q.forwardCount, 1);
});

test('engine queue: a deadline during the forward answers at once but holds the slot until the backend settles', async () => {
  const b = new FakeBackend();
  const release = b.block();
  const q = new EngineQueue(b, 1);
  const none = new AbortController().signal;
  const a = q.run(px(1), { signal: none, deadlineAt: performance.now() + 30, deadlineMs: 30 });
  const next = q.run(px(2), { signal: none, deadlineAt: far(), deadlineMs: 60_000 });
  await assert.rejects(a, (e: any) => e.code === 'E_DEADLINE' && /in the engine/.test(e.message));
  assert.equal(q.inFlight, 1);
  assert.equal(b.calls, 1, 'the next job waits for the slot');
  release();
  await next;
  assert.equal(b.calls, 2);
});

test('limiter: at most `limit` holders, FIFO, abort leaves the line', async () => {
  const l = new Limiter(2);
  const none = new AbortController().signal;
  const err = () => new Error('aborted');
  const r1 = await l.acquire(none, err);
  const r2 = await l.acquire(none, err);
  const order: number[] = [];
  const p3 = l.acquire(none, err).then((r) => (order.push(3), r));
  const ac = new AbortController();
  const p4 = l.acquire(ac.signal, err);
  const p5 = l.acquire(none, err).then((r) => (order.push(5), r));
  assert.equal(l.waiting, 3);
  ac.abort();
  await assert.rejects(p4, /aborted/);
  r1();
  r1(); // releasing twice is harmless
  const r3 = await p3;
  r2();
  const r5 = await p5;
  assert.deepEqual(order, [3, 5]);
  assert.equal(l.running, 2);
  r3();
  r5();
  assert.equal(l.running, 0);
  assert.throws(() => new Limiter(0), /Expected an integer >= 1 for limit but received 0/);
});

test('engine queue: maxInFlight 2 overlaps two forwards and no more', async () => {
  const b = new FakeBackend();
  let concurrent = 0;
  let maxConcurrent = 0;
  b.infer = async () => {
    concurrent++;
    maxConcurrent = Math.max(maxConcurrent, concurrent);
    await new Promise((r) => setTimeout(r, 10));
    concurrent--;
    return { logits: new Float32Array(0), predBoxes: new Float32Array(0), preprocessMs: 0, forwardMs: 10, transferMs: 0 };
  };
  const q = new EngineQueue(b, 2);
  const signal = new AbortController().signal;
  await Promise.all([1, 2, 3, 4, 5].map((v) => q.run(px(v), { signal, deadlineAt: far(), deadlineMs: 60_000 })));
  assert.equal(maxConcurrent, 2);
  assert.equal(q.forwardCount, 5);
});
