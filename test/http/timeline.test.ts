import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MARKS, PROBE_MS, Timeline, Timelines } from '../../src/http/timeline.ts';

test('timeline: stages are the intervals between the marks reached, named by the mark they end at, and add up to the total', () => {
  const t = new Timeline(100);
  t.mark('body_first', 101);
  t.mark('body_end', 103);
  t.mark('parsed', 104.5);
  t.mark('parsed', 200); // the first call wins
  // decode_started .. dispatched never reached (e.g. an error or a batch): the next stage starts at 'parsed'
  t.mark('frame_written', 110);
  t.mark('reply_read', 130);
  t.sidecar({ preprocessMs: 4, forwardMs: 12 });
  t.mark('serialised', 131);
  assert.deepEqual(t.stages(), [
    ['wait-body', 1], ['receive', 2], ['parse', 1.5], ['send', 5.5],
    ['preprocess', 4], ['inference', 12], ['sidecar-io', 4], ['serialise', 1],
  ]);
  const r = t.record(200);
  assert.equal(r.total, 31);
  assert.equal(r.marks.parsed, 104.5);
  assert.equal(t.header().split(', ').at(-3), 'total;dur=31');
  assert.match(t.header(), /^wait-body;dur=1, receive;dur=2, parse;dur=1\.5, send;dur=5\.5, preprocess;dur=4, inference;dur=12, sidecar-io;dur=4, serialise;dur=1, total;dur=31, gc;dur=0;desc="[^"]*", loop-delay;dur=0;desc="[^"]*"$/);
});

test('timeline: a mark earlier than the one before it is clamped (no negative stage), and the sidecar figures never exceed their stage', () => {
  const t = new Timeline(0);
  t.mark('decode_done', 10);
  t.mark('engine_queued', 9); // set from another clock reading: clamped to 10
  t.mark('reply_read', 15);
  t.sidecar({ preprocessMs: 3, forwardMs: 30 });
  assert.deepEqual(t.stages(), [['decode', 10], ['admit', 0], ['preprocess', 3], ['inference', 2], ['sidecar-io', 0]]);
  assert.equal(new Set(MARKS.map(([, s]) => s)).size, MARKS.length, 'stage names are unique');
});

test('timelines: the event loop blocked while a request is in flight is charged to it, not to one that ended before', async () => {
  const tls = new Timelines();
  try {
    const before = tls.begin(performance.now());
    await new Promise<void>((resolve) => tls.finish(before, performance.now(), resolve));
    const t = tls.begin(performance.now());
    await new Promise((r) => setTimeout(r, 2)); // the probe timer is armed
    const t0 = performance.now();
    while (performance.now() - t0 < 40); // the loop is blocked for 40 ms: the probe fires at least 40 − PROBE_MS late
    await new Promise((r) => setTimeout(r, 2 * PROBE_MS));
    assert.ok(t.loopDelayMs >= 40 - PROBE_MS && t.loopDelayMs <= performance.now() - t.start, `loop delay charged: ${t.loopDelayMs} ms`);
    assert.equal(before.loopDelayMs, 0, 'a request that had ended is not charged');
    await new Promise<void>((resolve) => tls.finish(t, performance.now(), resolve));
  } finally {
    tls.close();
  }
});
