// detect --track takes the tracker's frame rate from the video unless --frame-rate was given.
import assert from 'node:assert/strict';
import test from 'node:test';
import { trackerAt } from '../../cli/commands/detect-video.ts';
import { BYTETRACK_DEFAULTS, ByteTrack } from '../../src/track/bytetrack.ts';

const box = (x: number) => ({ box: [x, 10, x + 40, 50] as [number, number, number, number], score: 0.9, label_id: 1 });

/** Frames a confirmed track survives without detections before a new detection at its place gets a new id. */
function framesKept(frameRate: number): number {
  const t = new ByteTrack(trackerAt({ ...BYTETRACK_DEFAULTS, lostTrackBuffer: 30 }, frameRate));
  for (let i = 0; i < 3; i++) t.update([box(10)]);
  const id = t.update([box(10)])[0];
  for (let gap = 1; gap < 200; gap++) {
    for (let i = 0; i < gap; i++) t.update([]);
    // Nothing moved: the same place is re-associated while the lost track is kept.
    if (t.update([box(10)])[0] !== id) return gap - 1;
  }
  return Infinity;
}

test('the video\'s fps scales how long a lost track is kept (30 frames at 30 fps)', () => {
  const at10 = framesKept(10);
  const at60 = framesKept(60);
  assert.ok(at60 > at10, `kept ${at10} frames at 10 fps and ${at60} at 60 fps`);
  assert.equal(trackerAt(BYTETRACK_DEFAULTS, 12.5).frameRate, 12.5);
});

test('an unknown fps (0) keeps the configured frame rate', () => {
  assert.equal(trackerAt({ ...BYTETRACK_DEFAULTS, frameRate: 25 }, 0).frameRate, 25);
  assert.equal(trackerAt({ ...BYTETRACK_DEFAULTS, frameRate: 25 }, Number.NaN).frameRate, 25);
});
