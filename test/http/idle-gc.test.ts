// idle-gc.ts: one collection after traffic once the server is quiet, never while busy, never twice without
// traffic; and V8's gc() obtained at run time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { IdleCollector, exposedGc } from '../../src/http/idle-gc.ts';

test('IdleCollector: collects once after traffic when a check sees no new request and nothing in progress', () => {
  let requests = 0;
  let busy = false;
  let collected = 0;
  const c = new IdleCollector({ activity: () => requests, busy: () => busy, collect: () => void collected++ });
  assert.equal(c.check(), false, 'no traffic yet: nothing to give back');
  requests += 3;
  assert.equal(c.check(), false, 'requests since the last check: not quiet');
  busy = true;
  assert.equal(c.check(), false, 'quiet but a request or forward in progress');
  busy = false;
  assert.equal(c.check(), true, 'quiet and idle after traffic: one collection');
  assert.equal(c.check(), false, 'no traffic since: not again');
  requests++;
  assert.equal(c.check(), false);
  assert.equal(c.check(), true, 'the next burst gets its own');
  assert.equal(collected, 2);
  assert.equal(c.collections, 2);
});

test('exposedGc: V8\'s full collection as a function: an object only a WeakRef holds is gone after it', async () => {
  const gc = exposedGc();
  assert.ok(!(gc instanceof Error), String(gc));
  const ref = (() => new WeakRef({ pixels: new ArrayBuffer(1 << 20) }))();
  // A WeakRef's target lives to the end of the job that created or read it.
  await new Promise((r) => setImmediate(r));
  gc();
  assert.equal(ref.deref(), undefined);
});
