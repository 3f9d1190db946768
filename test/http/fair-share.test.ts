// The fair share on its own: the decode/memory limiter and the engine queue serve the client holding the least
// first, each client in its own arrival order, within a bounded share; one client's backlog never keeps another
// client's first request behind all of it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EngineQueue } from '../../src/http/engine-queue.ts';
import { Limiter } from '../../src/http/limiter.ts';
import { MemoryBudget } from '../../src/http/memory-budget.ts';
import { FakeBackend, waitFor } from './helpers.ts';

const none = new AbortController().signal;
const err = () => new Error('aborted');
const far = () => performance.now() + 60_000;

test('limiter: a second client\'s first waiter is served before the first client\'s backlog', async () => {
  const l = new Limiter(1);
  const order: string[] = [];
  const first = await l.acquire(none, err, 1, 'a');
  const waits = [
    ...['a1', 'a2', 'a3'].map((n) => l.acquire(none, err, 1, 'a').then((r) => (order.push(n), r))),
    l.acquire(none, err, 1, 'b').then((r) => (order.push('b1'), r)),
  ];
  assert.equal(l.waiting, 4);
  first();
  for (let i = 0; i < 4; i++) {
    await waitFor(() => order.length === i + 1, `grant ${i + 1}`);
    (await waits[['a1', 'a2', 'a3', 'b1'].indexOf(order[i]!)]!)();
  }
  // a was served last: b's first request goes next, then a's backlog in its own arrival order.
  assert.deepEqual(order, ['b1', 'a1', 'a2', 'a3']);
  assert.equal(l.running, 0);
});

test('limiter: a client at its share is passed over while another\'s request fits; it alone may still take one', async () => {
  const l = new Limiter(10, { clientLimit: 4 });
  const a1 = await l.acquire(none, err, 4, 'a');
  let a2Granted = false;
  const a2 = l.acquire(none, err, 1, 'a').then((r) => ((a2Granted = true), r));
  const b1 = await l.acquire(none, err, 3, 'b');
  assert.equal(a2Granted, false, 'a is at its share of 4');
  assert.equal(l.heldByClient('b'), 3);
  a1();
  (await a2)();
  b1();
  // A request larger than the share is granted to a client that holds nothing.
  const big = await l.acquire(none, err, 8, 'c');
  assert.equal(l.heldByClient('c'), 8);
  big();
});

test('limiter: the one picked next is not overtaken by a smaller request that would fit (no starvation)', async () => {
  const l = new Limiter(10);
  const held = await l.acquire(none, err, 6, 'x');
  const order: string[] = [];
  const big = l.acquire(none, err, 8, 'a').then((r) => (order.push('big'), r));
  const small = l.acquire(none, err, 1, 'a').then((r) => (order.push('small'), r));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(order, [], 'the small one waits behind its own client\'s big one');
  held();
  (await big)();
  (await small)();
  assert.deepEqual(order, ['big', 'small']);
});

test('engine queue: with equal costs, one forward for each waiting client in turn, FIFO within a client', async (t) => {
  // A frozen clock: every forward costs 0 ms of engine time, so only the turn order decides.
  t.mock.method(performance, 'now', () => 1000);
  const b = new FakeBackend();
  const seen: string[] = [];
  const release = b.block();
  const infer = b.infer.bind(b);
  b.infer = async (input, o) => {
    seen.push((input as unknown as { tag: string }).tag);
    return infer(input, o);
  };
  const q = new EngineQueue(b, 1);
  const job = (tag: string, client: string) => q.run({ pixelValues: new Float32Array(1), tag } as never, { signal: none, deadlineAt: far(), deadlineMs: 60_000, client });
  const jobs = [job('a1', 'a'), job('a2', 'a'), job('a3', 'a'), job('a4', 'a'), job('b1', 'b'), job('b2', 'b'), job('c1', 'c')];
  await waitFor(() => b.calls === 1, 'the first forward');
  release();
  await Promise.all(jobs);
  assert.deepEqual(seen, ['a1', 'b1', 'c1', 'a2', 'b2', 'a3', 'a4']);
});

test('engine queue: onStart is called once, when the job is handed to the backend', async () => {
  const b = new FakeBackend();
  const release = b.block();
  const q = new EngineQueue(b, 1);
  const started: number[] = [];
  const p1 = q.run({ pixelValues: new Float32Array(1) }, { signal: none, deadlineAt: far(), deadlineMs: 60_000, onStart: () => started.push(1) });
  const p2 = q.run({ pixelValues: new Float32Array(1) }, { signal: none, deadlineAt: far(), deadlineMs: 60_000, onStart: () => started.push(2) });
  await waitFor(() => b.calls === 1, 'the first forward');
  assert.deepEqual(started, [1]);
  release();
  await Promise.all([p1, p2]);
  assert.deepEqual(started, [1, 2]);
});

test('memory budget: undecoded bytes are refused past half the budget (a quarter per client); work waits for room', async () => {
  const m = new MemoryBudget(512 * 1024 * 1024);
  const MiB = 1024 * 1024;
  const a = m.undecodedFor('a');
  a.add(128 * MiB);
  assert.throws(() => a.add(1), (e: any) => e.code === 'E_QUEUE_FULL' && /one client's share \(128 MiB\)/.test(e.message));
  assert.equal(a.held, 128 * MiB, 'a refused chunk is not counted');
  const b = m.undecodedFor('b');
  b.add(128 * MiB);
  const c = m.undecodedFor('c');
  assert.throws(() => c.add(1), (e: any) => e.code === 'E_QUEUE_FULL' && /the 256 MiB of --memory-limit they may take/.test(e.message));
  // Work for 256 MiB (the most one image may take) waits until undecoded bytes leave room for it.
  const other = await m.work.acquire(none, err, 100 * MiB, 'x');
  let granted = false;
  const w = m.work.acquire(none, err, 256 * MiB, 'd').then((r) => ((granted = true), r));
  await new Promise((r) => setImmediate(r));
  assert.equal(granted, false);
  a.release();
  (await w)();
  assert.equal(granted, true);
  other();
  b.release();
  assert.equal(m.held, 0);
  assert.match(m.tooLargeFor(8192, 8192, 1500 * MiB, true).message, /return_image on a 8192x8192 image needs about 1500 MiB .* this server allows 256 MiB per image \(half of --memory-limit 512 MiB\): ask without return_image/);
  assert.throws(() => new MemoryBudget(100), /Expected an integer >= 536870912/);
});
