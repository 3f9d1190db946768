// The engine queue and the prep limiter on their own: order, one forward at a time, drop-before-forward on
// abort and deadline, busy-time accounting.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { EngineQueue } from '../../src/http/engine-queue.ts';
import { Limiter } from '../../src/http/limiter.ts';
import { FakeBackend } from './helpers.ts';

const px = (v: number) => ({ pixelValues: new Float32Array([v]) });
const far = () => performance.now() + 60_000;
const result = (forwardMs: number) => ({ outputs: {}, preprocessMs: 0, forwardMs, transferMs: 0 });
/** Lets the promise callbacks queued so far run (setImmediate is not among the faked timers). */
const turn = () => new Promise<void>((r) => setImmediate(r));

/** performance.now() under the test's control and node:test's fake setTimeout: a deadline fires on advance(), never on the wall clock. */
function fakeClock(t: TestContext) {
  let now = 1000;
  t.mock.method(performance, 'now', () => now);
  t.mock.timers.enable({ apis: ['setTimeout'] });
  return {
    advance(ms: number) {
      now += ms;
      t.mock.timers.tick(ms);
    },
  };
}

/** Records whether a promise has settled, without handling its rejection for the test. */
function watch<T>(p: Promise<T>): { p: Promise<T>; settled: () => boolean } {
  let done = false;
  p.then(() => (done = true), () => (done = true));
  return { p, settled: () => done };
}

test('engine queue: FIFO, one forward at a time; each job waits exactly the forwards ahead of it; busy time is their sum', async (t) => {
  const clock = fakeClock(t);
  const b = new FakeBackend();
  const seen: number[] = [];
  const finish: Array<() => void> = [];
  let concurrent = 0;
  let maxConcurrent = 0;
  b.infer = async (p) => {
    concurrent++;
    maxConcurrent = Math.max(maxConcurrent, concurrent);
    seen.push('pixelValues' in p ? p.pixelValues[0]! : -1);
    await new Promise<void>((r) => finish.push(r));
    concurrent--;
    return result(5);
  };
  const q = new EngineQueue(b, 1);
  const signal = new AbortController().signal;
  const runs = [1, 2, 3, 4, 5].map((v) => q.run(px(v), { signal, deadlineAt: far(), deadlineMs: 60_000 }));
  for (let i = 0; i < 5; i++) {
    assert.equal(finish.length, 1, `forward ${i + 1} is alone on the engine`);
    clock.advance(5);
    finish.shift()!();
    await turn();
  }
  const done = await Promise.all(runs);
  assert.deepEqual(seen, [1, 2, 3, 4, 5]);
  assert.equal(maxConcurrent, 1);
  assert.deepEqual(done.map((r) => r.queueMs), [0, 5, 10, 15, 20], 'each waited for the 5 ms forwards ahead of it');
  assert.equal(q.busyMs(), 25, 'five forwards of 5 ms back to back');
  await q.idle();
});

test('engine queue: aborted and expired waiters are dropped without a forward; rejectWaiting empties the line', async (t) => {
  const clock = fakeClock(t);
  const b = new FakeBackend();
  const release = b.block();
  const q = new EngineQueue(b, 1);
  const none = new AbortController().signal;
  const first = q.run(px(1), { signal: none, deadlineAt: far(), deadlineMs: 60_000 });
  assert.equal(b.calls, 1, 'the first job is dispatched at once');
  const ac = new AbortController();
  const aborted = q.run(px(2), { signal: ac.signal, deadlineAt: far(), deadlineMs: 60_000 });
  const expired = watch(q.run(px(3), { signal: none, deadlineAt: performance.now() + 30, deadlineMs: 30 }));
  const rejected = q.run(px(4), { signal: none, deadlineAt: far(), deadlineMs: 60_000 });
  assert.equal(q.depth, 3);
  ac.abort();
  await assert.rejects(aborted, (e: any) => e.code === 'E_ABORTED');
  clock.advance(29);
  await turn();
  assert.equal(expired.settled(), false, '1 ms before its deadline the job still waits');
  assert.equal(q.depth, 2);
  clock.advance(1);
  await assert.rejects(expired.p, (e: any) => e.code === 'E_DEADLINE' && /waiting for the engine/.test(e.message));
  assert.equal(q.depth, 1);
  q.rejectWaiting(Object.assign(new Error('draining'), { code: 'X' }));
  await assert.rejects(rejected, /draining/);
  assert.equal(q.depth, 0);
  release();
  await first;
  await q.idle();
  assert.equal(b.calls, 1);
  assert.equal(q.forwardCount, 1);
});

test('engine queue: a deadline during the forward answers at once but holds the slot until the backend settles', async (t) => {
  const clock = fakeClock(t);
  const b = new FakeBackend();
  const release = b.block();
  const q = new EngineQueue(b, 1);
  const none = new AbortController().signal;
  const a = watch(q.run(px(1), { signal: none, deadlineAt: performance.now() + 30, deadlineMs: 30 }));
  const next = q.run(px(2), { signal: none, deadlineAt: far(), deadlineMs: 60_000 });
  clock.advance(29);
  await turn();
  assert.equal(a.settled(), false, 'answered only when its deadline passes');
  clock.advance(1);
  await assert.rejects(a.p, (e: any) => e.code === 'E_DEADLINE' && /in the engine/.test(e.message));
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
  const finish: Array<() => void> = [];
  b.infer = async () => {
    await new Promise<void>((r) => finish.push(r));
    return result(10);
  };
  const q = new EngineQueue(b, 2);
  const signal = new AbortController().signal;
  const runs = Promise.all([1, 2, 3, 4, 5].map((v) => q.run(px(v), { signal, deadlineAt: far(), deadlineMs: 60_000 })));
  const inFlight: number[] = [];
  while (q.forwardCount < 5 || finish.length > 0) {
    inFlight.push(finish.length);
    finish.shift()?.();
    await turn();
  }
  await runs;
  assert.deepEqual(inFlight, [2, 2, 2, 2, 1], 'two forwards overlap until the last');
  assert.equal(q.forwardCount, 5);
});
