// ByteTrack against roboflow trackers 2.6.1's ByteTrackTracker: on the sequences in test/fixtures/tracking
// (defaults, and every parameter changed) and on ../shared/fixtures/tracking (or RFDETR_TRACKING_FIXTURES),
// the share of detections whose track agrees with the reference's up to renumbering must be ≥ 99.5 %.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../src/config/paths.ts';
import { ByteTrack, BYTETRACK_DEFAULTS, MAX_TRACK_DETECTIONS, type ByteTrackOptions, type TrackInput } from '../../src/track/bytetrack.ts';
import { isRfdetrError } from '../../src/errors.ts';
import { trackAgreement } from '../helpers/track-agreement.ts';
import { requireAll } from '../helpers/skip.ts';

const REQUIRED = 0.995;
const localDir = path.join(packageRoot, 'test', 'fixtures', 'tracking');
const sharedDir = process.env.RFDETR_TRACKING_FIXTURES || path.resolve(packageRoot, '..', 'shared', 'fixtures', 'tracking');

function frames(file: string): TrackInput[][] {
  return fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as { detections: TrackInput[] }).detections);
}

/** The reference's snake_case parameters as ByteTrack options. */
function options(params: Record<string, number>): Partial<ByteTrackOptions> {
  const camel = (k: string) => k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
  return Object.fromEntries(Object.entries(params).map(([k, v]) => [camel(k), v]));
}

function agreementOn(ndjson: string, expected: string) {
  const ref = JSON.parse(fs.readFileSync(expected, 'utf8')) as { ids: number[][]; params: Record<string, number> };
  const bt = new ByteTrack(options(ref.params));
  return trackAgreement(ref.ids, frames(ndjson).map((d) => bt.update(d)));
}

for (const [name, seq, expected] of [
  ['seed-101 (defaults)', 'seed-101.ndjson', 'seed-101.expected.json'],
  ['seed-303 (defaults)', 'seed-303.ndjson', 'seed-303.expected.json'],
  ['seed-303 (every parameter changed)', 'seed-303.ndjson', 'seed-303.params.expected.json'],
] as const) {
  test(`ByteTrack agrees with the reference on ${name}`, () => {
    const a = agreementOn(path.join(localDir, seq), path.join(localDir, expected));
    assert.ok(a.detections > 1000 && a.trackedByReference > 900, JSON.stringify(a));
    assert.ok(a.fraction >= REQUIRED, `${a.agreeing}/${a.detections} agree (${(a.fraction * 100).toFixed(2)} %)`);
  });
}

const sharedSeqs = fs.existsSync(sharedDir) ? fs.readdirSync(sharedDir).filter((f) => f.endsWith('.ndjson')).sort() : [];
const sharedSkip = sharedSeqs.length > 0 ? null : `no tracking fixtures at ${sharedDir} (set RFDETR_TRACKING_FIXTURES)`;
test('ByteTrack agrees with the reference on every shared tracking sequence', { skip: sharedSkip && !requireAll ? sharedSkip : false }, () => {
  assert.equal(sharedSkip, null, `RFDETR_REQUIRE_ALL=1: ${sharedSkip}`);
  for (const f of sharedSeqs) {
    const a = agreementOn(path.join(sharedDir, f), path.join(sharedDir, f.replace(/\.ndjson$/, '.expected.json')));
    assert.ok(a.fraction >= REQUIRED, `${f}: ${a.agreeing}/${a.detections} agree (${(a.fraction * 100).toFixed(2)} %)`);
  }
});

test('ByteTrack: ids need two consecutive frames, survive a short gap, and unmatched or low boxes get null', () => {
  const bt = new ByteTrack();
  const box = (x: number): [number, number, number, number] => [x, 100, x + 50, 150];
  assert.deepEqual(bt.update([{ box: box(0), score: 0.9, label_id: 1 }]), [null]); // tentative
  assert.deepEqual(bt.update([{ box: box(2), score: 0.9, label_id: 1 }, { box: [600, 600, 620, 620], score: 0.3, label_id: 1 }]), [0, null]);
  for (let f = 0; f < 5; f++) assert.deepEqual(bt.update([]), []); // lost, within the buffer
  // a low-score box where the track is predicted: recovered by the second stage
  assert.deepEqual(bt.update([{ box: box(4), score: 0.4, label_id: 1 }]), [0]);
  // a new object far away: tentative, then id 1
  assert.deepEqual(bt.update([{ box: box(6), score: 0.9, label_id: 1 }, { box: [900, 100, 950, 150], score: 0.8, label_id: 3 }]), [0, null]);
  assert.deepEqual(bt.update([{ box: [902, 100, 952, 150], score: 0.8, label_id: 3 }, { box: box(8), score: 0.9, label_id: 1 }]), [1, 0]);
});

test('ByteTrack: a confirmed track is dropped after lostTrackBuffer · frameRate / 30 missed frames', () => {
  for (const [buffer, rate, kept] of [[3, 30, 3], [3, 60, 6]] as const) {
    const bt = new ByteTrack({ lostTrackBuffer: buffer, frameRate: rate });
    bt.update([{ box: [0, 0, 50, 50], score: 0.9, label_id: 1 }]);
    assert.deepEqual(bt.update([{ box: [0, 0, 50, 50], score: 0.9, label_id: 1 }]), [0]);
    for (let f = 0; f < kept; f++) bt.update([]);
    assert.deepEqual(bt.update([{ box: [0, 0, 50, 50], score: 0.9, label_id: 1 }]), [0], `buffer ${buffer} at ${rate} fps: kept`);
    for (let f = 0; f < kept + 1; f++) bt.update([]);
    assert.deepEqual(bt.update([{ box: [0, 0, 50, 50], score: 0.9, label_id: 1 }]), [null], `buffer ${buffer} at ${rate} fps: dropped`);
  }
});

test('ByteTrack: bad options and bad detections are errors naming the value and what was expected', () => {
  assert.deepEqual({ ...new ByteTrack().options }, { ...BYTETRACK_DEFAULTS });
  assert.throws(() => new ByteTrack({ lostTrackBuffer: -1 }), /expected an integer ≥ 0 for lostTrackBuffer but received -1/);
  assert.throws(() => new ByteTrack({ frameRate: 0 }), /expected a finite number > 0 for frameRate but received 0/);
  assert.throws(() => new ByteTrack({ minimumConsecutiveFrames: 0.5 }), /minimumConsecutiveFrames but received 0.5/);
  assert.throws(() => new ByteTrack({ highConfDetThreshold: 1.5 }), /expected a number in \[0, 1\] for highConfDetThreshold but received 1.5/);
  assert.throws(() => new ByteTrack().update([{ box: [0, 0, NaN, 1] as never, score: 0.5, label_id: 0 }]), /expected a detection/);
});

test('ByteTrack: a frame of up to 300 detections is tracked; more is an error naming the count and the cap, before any work', () => {
  assert.equal(MAX_TRACK_DETECTIONS, 300);
  const frame = (n: number) => Array.from({ length: n }, (_, i) => ({ box: [i, i, i + 50, i + 50] as [number, number, number, number], score: 0.9, label_id: 1 }));
  const bt = new ByteTrack();
  assert.equal(bt.update(frame(300)).length, 300);
  assert.equal(bt.update(frame(300)).filter((id) => id !== null).length, 300, 'the 300 are tracked');
  assert.throws(() => bt.update(frame(301)), (e: Error) => isRfdetrError(e, 'E_USAGE') && /a frame has 301 detections; at most 300 per frame are tracked/.test(e.message));
  assert.equal(bt.update(frame(300)).filter((id) => id !== null).length, 300, 'a refused frame changes no track');
});

test('trackAgreement counts up to renumbering, and a split or merged track as disagreement', () => {
  const ref = [[0, 1, -1], [1, 0], [0, 1]];
  assert.equal(trackAgreement(ref, [[7, 3, null], [3, 7], [7, 3]]).fraction, 1);
  // frame 2's ids swapped: those two detections disagree
  assert.equal(trackAgreement(ref, [[7, 3, null], [3, 7], [3, 7]]).agreeing, 5);
  // an untracked detection given an id, a tracked one given none
  assert.equal(trackAgreement(ref, [[7, null, 4], [3, 7], [7, 3]]).agreeing, 5);
});
