// `rfdetr track`: NDJSON frames in, the same frames with track_id on every detection out, in order; the
// reference's tracks (trackers 2.6.1) with default and with changed flags; per-source trackers; a line that is
// not a frame named in the error; and the real bin answering a frame on a pipe before its input ends.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { packageRoot } from '../../src/config/paths.ts';
import { trackAgreement } from '../helpers/track-agreement.ts';
import { binPath, runInProcess } from './helpers.ts';

const dir = path.join(packageRoot, 'test', 'fixtures', 'tracking');
const seq = (name: string) => path.join(dir, `${name}.ndjson`);
const expectedIds = (name: string) => (JSON.parse(fs.readFileSync(path.join(dir, `${name}.expected.json`), 'utf8')) as { ids: number[][] }).ids;

interface Det { label: string; label_id: number; score: number; box: number[]; track_id?: number | null }
interface Frame { frame: number; source?: string; detections: Det[] }
const parse = (out: string) => out.trim().split('\n').map((l) => JSON.parse(l) as Frame);
const ids = (frames: Frame[]) => frames.map((f) => f.detections.map((d) => d.track_id ?? null));

test('rfdetr track FILE: every line back in order, each detection unchanged but for track_id, the reference\'s tracks', async () => {
  const r = await runInProcess(['track', seq('seed-101')]);
  assert.equal(r.code, 0, r.stderr);
  const input = parse(fs.readFileSync(seq('seed-101'), 'utf8'));
  const out = parse(r.stdout);
  assert.equal(out.length, input.length);
  out.forEach((f, i) => {
    assert.equal(f.frame, input[i]!.frame);
    assert.equal(f.detections.length, input[i]!.detections.length);
    f.detections.forEach((d, k) => {
      assert.ok(d.track_id === null || Number.isInteger(d.track_id), JSON.stringify(d));
      const { track_id: _, ...rest } = d;
      assert.deepEqual(rest, input[i]!.detections[k]);
    });
  });
  assert.equal(trackAgreement(expectedIds('seed-101'), ids(out)).fraction, 1);
});

test('rfdetr track - with every tracker flag changed gives the reference\'s tracks for those parameters', async () => {
  const flags = ['--lost-track-buffer', '12', '--frame-rate', '25', '--track-activation-threshold', '0.5', '--minimum-consecutive-frames', '3', '--minimum-iou-threshold', '0.3', '--high-conf-det-threshold', '0.45'];
  const r = await runInProcess(['track', ...flags, '-'], { stdin: fs.readFileSync(seq('seed-303')) });
  assert.equal(r.code, 0, r.stderr);
  const changed = trackAgreement(expectedIds('seed-303.params'), ids(parse(r.stdout)));
  assert.ok(changed.fraction >= 0.995, JSON.stringify(changed));
  // and the defaults do not: the flags took effect
  const d = await runInProcess(['track', seq('seed-303')]);
  assert.ok(trackAgreement(expectedIds('seed-303.params'), ids(parse(d.stdout))).fraction < 0.95);
});

test('rfdetr track: sources tracked apart, summary lines passed through, blank lines dropped', async () => {
  const frames = parse(fs.readFileSync(seq('seed-101'), 'utf8')).slice(0, 40);
  const alone = parse((await runInProcess(['track', '-'], { stdin: Buffer.from(frames.map((f) => JSON.stringify(f)).join('\n')) })).stdout);
  // the same frames as two interleaved sources, a blank line and a summary line
  const mixed = frames.flatMap((f) => [{ ...f, source: 'a.mp4' }, { ...f, source: 'b.mp4' }]).map((f) => JSON.stringify(f));
  const input = [...mixed.slice(0, 10), '', ...mixed.slice(10), JSON.stringify({ summary: true, frames: 80 })].join('\n');
  const r = await runInProcess(['track', '-'], { stdin: Buffer.from(`${input}\n`) });
  assert.equal(r.code, 0, r.stderr);
  const out = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Frame & { summary?: boolean });
  assert.equal(out.length, 81);
  assert.deepEqual(out[80], { summary: true, frames: 80 });
  for (const src of ['a.mp4', 'b.mp4']) assert.deepEqual(ids(out.filter((f) => f.source === src)), ids(alone));
  assert.ok(ids(alone).flat().some((id) => id !== null));
});

test('rfdetr track: a segmentation detection\'s mask (RLE or polygons) comes out unchanged, after it the track_id', async () => {
  const frames = parse(fs.readFileSync(seq('seed-101'), 'utf8')).slice(0, 5);
  const rle = { size: [480, 640], counts: 'PQ;3n>0O1N2M3' };
  const polygons = [[10, 20, 30, 20, 30, 40, 10, 40]];
  const withMasks = frames.map((f) => ({ ...f, detections: f.detections.map((d, k) => ({ ...d, mask: k % 2 ? polygons : rle })) }));
  const r = await runInProcess(['track', '-'], { stdin: Buffer.from(withMasks.map((f) => JSON.stringify(f)).join('\n')) });
  assert.equal(r.code, 0, r.stderr);
  const out = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { detections: (Det & { mask: unknown })[] });
  assert.ok(out.flatMap((f) => f.detections).length > 0);
  out.forEach((f, i) => f.detections.forEach((d, k) => {
    assert.deepEqual(d.mask, withMasks[i]!.detections[k]!.mask);
    assert.deepEqual(Object.keys(d).slice(-2), ['mask', 'track_id']);
  }));
});

test('rfdetr track: a line that is not a frame stops the run naming the line; a missing file and a bad flag are errors', async () => {
  const good = fs.readFileSync(seq('seed-101'), 'utf8').split('\n').slice(0, 2);
  const r = await runInProcess(['track', '-'], { stdin: Buffer.from([good[0], '{"frame": 1, "detections": [', good[1]].join('\n')) });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /line 2 of stdin is not JSON: \{"frame": 1, "detections": \[; expected one JSON object per line/);
  assert.equal(r.stdout.trim().split('\n').length, 1); // the frame before it was written
  const box = await runInProcess(['track', '-'], { stdin: Buffer.from('{"detections": [{"box": [1, 2, 3], "score": 0.9}]}\n') });
  assert.equal(box.code, 1);
  assert.match(box.stderr, /line 1 of stdin: detection 0 is \{"box":\[1,2,3\],"score":0.9\}; expected \{"box": \[x1, y1, x2, y2\]/);
  const arr = await runInProcess(['track', '-'], { stdin: Buffer.from('[1, 2]\n') });
  assert.match(arr.stderr, /line 1 of stdin is \[1, 2\], not an object/);
  const missing = await runInProcess(['track', 'no-such.ndjson']);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /cannot read no-such.ndjson: ENOENT/);
  // A frame over the 300 detections the tracker takes stops the run naming it, after the frames before it.
  const det = (i: number) => ({ box: [i, i, i + 40, i + 40], score: 0.9, label_id: 1 });
  const many = [JSON.stringify({ frame: 0, detections: Array.from({ length: 300 }, (_, i) => det(i)) }), JSON.stringify({ frame: 1, detections: Array.from({ length: 4000 }, (_, i) => det(i)) })].join('\n');
  const over = await runInProcess(['track', '-'], { stdin: Buffer.from(many) });
  assert.equal(over.code, 1);
  assert.match(over.stderr, /line 2 of stdin has 4000 detections; rfdetr track takes at most 300 per frame .*keep the 300 best-scoring of each frame first/);
  assert.equal(over.stdout.trim().split('\n').length, 1);
  assert.equal((JSON.parse(over.stdout) as Frame).detections.filter((d) => d.track_id === null).length, 300, 'frame 0 tracked (tentative: null)');
  const flag = await runInProcess(['track', '--high-conf-det-threshold', '2', seq('seed-101')]);
  assert.equal(flag.code, 2);
  assert.match(flag.stderr, /--high-conf-det-threshold <t>' argument '2' is invalid. expected a number from 0 to 1/);
});

test('rfdetr track (real bin): each frame on a pipe is answered before the next is written', async () => {
  const lines = fs.readFileSync(seq('seed-101'), 'utf8').trim().split('\n').slice(0, 3);
  const child = execa(process.execPath, [binPath, 'track'], { stdin: 'pipe', stdout: 'pipe', reject: false, timeout: 20_000 });
  let buffered = '';
  const nextLine = () =>
    new Promise<string>((resolve, reject) => {
      const check = () => {
        const nl = buffered.indexOf('\n');
        if (nl < 0) return false;
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        child.stdout!.off('data', onData);
        child.off('exit', onExit);
        resolve(line);
        return true;
      };
      const onData = (c: Buffer) => {
        buffered += c.toString();
        check();
      };
      const onExit = () => reject(new Error(`rfdetr track exited before answering: ${buffered}`));
      if (check()) return;
      child.stdout!.on('data', onData);
      child.once('exit', onExit);
    });
  const got: Frame[] = [];
  for (const l of lines) {
    child.stdin!.write(`${l}\n`);
    got.push(JSON.parse(await nextLine()) as Frame);
  }
  child.stdin!.end();
  const r = await child;
  assert.equal(r.exitCode, 0, String(r.stderr));
  assert.deepEqual(got.map((f) => f.frame), [0, 1, 2]);
  assert.deepEqual(ids(got), expectedIds('seed-101').slice(0, 3).map((f) => f.map((i) => (i < 0 ? null : i))));
});
