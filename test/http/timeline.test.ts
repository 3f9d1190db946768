import { mock, test } from 'node:test';
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

test('timeline: a file the sidecar decoded: its decode is a `sidecar-decode` stage before the resize, within the sidecar stage', () => {
  const t = new Timeline(0);
  t.mark('decode_done', 2);
  t.mark('frame_written', 3);
  t.mark('reply_read', 23);
  t.sidecar({ decodeMs: 5, preprocessMs: 3, forwardMs: 10 });
  assert.deepEqual(t.stages(), [['decode', 2], ['send', 1], ['sidecar-decode', 5], ['preprocess', 3], ['inference', 10], ['sidecar-io', 2]]);
  assert.match(t.header(), /^decode;dur=2, send;dur=1, sidecar-decode;dur=5, preprocess;dur=3, inference;dur=10, sidecar-io;dur=2, total;dur=23, /);
  // Figures larger than the stage are cut to it, the decode first: the stages still add up to the round trip.
  const over = new Timeline(0);
  over.mark('reply_read', 4);
  over.sidecar({ decodeMs: 3, preprocessMs: 3, forwardMs: 3 });
  assert.deepEqual(over.stages(), [['sidecar-decode', 3], ['preprocess', 1], ['inference', 0], ['sidecar-io', 0]]);
});

test('timelines: the event loop blocked while a request is in flight is charged to it, not to one that ended before', () => {
  // The probe's timer and the clock it reads are both fakes: a 40 ms block of the loop is the clock moving
  // 40 ms past the probe's due time before its timer runs, so the charge is exact.
  mock.timers.enable({ apis: ['setTimeout', 'setImmediate'] });
  let clock = 1000;
  const tls = new Timelines(() => clock);
  try {
    const before = tls.begin(clock);
    let beforeDone = false;
    tls.finish(before, clock + 1, () => (beforeDone = true));
    mock.timers.tick(0);
    assert.equal(beforeDone, true, 'finish() calls back a turn later');
    clock = 1010;
    const t = tls.begin(clock);
    const ended = tls.begin(clock);
    ended.end(1012); // ended, its finishing turn not yet run: still among those the probe charges
    clock += PROBE_MS;
    mock.timers.tick(PROBE_MS);
    assert.equal(t.loopDelayMs, 0, 'a probe that fires on time charges nothing');
    clock += PROBE_MS + 40; // the loop was blocked: the probe runs 40 ms after it was due
    mock.timers.tick(PROBE_MS);
    assert.equal(t.loopDelayMs, 40, 'the whole block is charged to the request in flight');
    assert.equal(ended.loopDelayMs, 0, 'a request that ended before the block is not charged');
    assert.equal(before.loopDelayMs, 0, 'a request that had finished is not charged');
    clock += PROBE_MS;
    mock.timers.tick(PROBE_MS);
    assert.equal(t.loopDelayMs, 40, 'the next probe was on time again');
  } finally {
    tls.close();
    mock.timers.reset();
  }
});
