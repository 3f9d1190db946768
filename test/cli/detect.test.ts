// `rfdetr detect` in process, with the fixture-replay backend standing in for the engine (the real engine runs
// in cli-e2e.test.ts): input handling, NDJSON, the response object, --classes, --raw, --save, progress, exits.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { classColour } from '../../src/draw/annotate.ts';
import { synthWeights } from '../helpers/synth-weights.ts';
import { CASES, caseImage, DecodingReplayBackend, fixtureDetections, FixtureReplayBackend, runInProcess } from './helpers.ts';
import { fixtureCases } from '../helpers/fixture-images.ts';

interface Line {
  image: string;
  detections: { label: string; label_id: number; score: number; box: number[]; box_cxcywh_norm: number[] }[];
  num_detections: number;
  image_size: { width: number; height: number };
  input_size: number[];
  threshold: number;
  timing_ms: Record<string, number>;
  raw?: { logits: number[][]; pred_boxes: number[][] };
}

function lines(stdout: string): Line[] {
  assert.ok(stdout.endsWith('\n'), 'stdout ends with a newline');
  return stdout.slice(0, -1).split('\n').map((l) => JSON.parse(l) as Line);
}

/** Detections equal the fixture's at 0.5: label, id and score exactly, box to f32 tolerance. */
function assertFixture(line: Line, c: string): void {
  const want = fixtureDetections(c);
  const w = want.detections['0.5']!;
  assert.equal(line.num_detections, w.length, `${c}: count`);
  assert.deepEqual(line.image_size, { width: want.image.width, height: want.image.height });
  assert.equal(line.detections.length, w.length);
  line.detections.forEach((d, i) => {
    const e = w[i]!;
    assert.equal(d.label, e.label_name, `${c} #${i} label`);
    assert.equal(d.label_id, e.label, `${c} #${i} label_id`);
    assert.equal(d.score, e.score, `${c} #${i} score`);
    d.box.forEach((v, k) => assert.ok(Math.abs(v - e.box_xyxy[k]!) <= 1e-4 * Math.max(1, Math.abs(e.box_xyxy[k]!)), `${c} #${i} box[${k}] ${v} vs ${e.box_xyxy[k]}`));
  });
}

test('detect --json: one compact line per image, each the /predict response plus "image", equal to the fixtures', async () => {
  const r = await runInProcess(['detect', '--json', ...CASES.map(caseImage)]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.split('\n').length, CASES.length + 1, 'exactly one line per image');
  assert.ok(!r.stdout.includes('\n\n') && !/^\s/.test(r.stdout));
  const ls = lines(r.stdout);
  CASES.forEach((c, i) => {
    const l = ls[i]!;
    assert.equal(l.image, caseImage(c));
    assert.deepEqual(Object.keys(l), ['image', 'detections', 'num_detections', 'image_size', 'input_size', 'threshold', 'timing_ms']);
    assert.deepEqual(l.input_size, [560, 560]);
    assert.equal(l.threshold, 0.5);
    assert.deepEqual(Object.keys(l.timing_ms).sort(), ['decode', 'inference', 'postprocess', 'preprocess', 'queue', 'total', 'transfer']);
    assert.equal(l.timing_ms.inference, 1.5, 'inference is the backend forward_ms');
    assert.equal(l.timing_ms.transfer, 0.25);
    assertFixture(l, c);
  });
  assert.equal(r.requests.length, 1, 'one engine for the whole run');
  assert.equal(r.requests[0]!.engine, 'cpu');
  assert.equal(r.requests[0]!.weightsDir, await synthWeights(), 'weights resolved from TT_RF_DETR_WEIGHTS');
  // the closing line goes to stderr, not stdout
  assert.match(r.stderr, /detect: 3 images in [\d.]+ s \([\d.]+ images\/s\); mean ms per image: decode [\d.]+, preprocess [\d.]+, inference 1\.5,/);
});

test('detect: a plain PNG goes to the sidecar as the file when it decodes PNG (the closing line says so); --json stdout is the same', async () => {
  const here = await runInProcess(['detect', '--json', ...CASES.map(caseImage)]);
  assert.equal(here.code, 0, here.stderr);
  assert.match(here.stderr, /; decoded: 0 by the sidecar, 3 here\n/);
  const backend = new DecodingReplayBackend();
  const r = await runInProcess(['detect', '--json', ...CASES.map(caseImage)], { backend });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(backend.inputs, ['encoded', 'encoded', 'encoded'], 'each file sent for the sidecar to decode');
  assert.match(r.stderr, /; decoded: 3 by the sidecar, 0 here\n/);
  const strip = (out: string) => lines(out).map(({ timing_ms: _t, ...rest }) => rest);
  assert.deepEqual(strip(r.stdout), strip(here.stdout), 'the same lines, timing aside');
  lines(r.stdout).forEach((l) => assert.ok(l.timing_ms.decode! >= 2, 'timing_ms.decode has the sidecar\'s decode'));
  // --save needs the pixels here: decoded here, never sent as the file.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-detect-save-'));
  const saving = new DecodingReplayBackend();
  const s = await runInProcess(['detect', '--save', dir, caseImage(CASES[0]!)], { backend: saving });
  assert.equal(s.code, 0, s.stderr);
  assert.deepEqual(saving.inputs, ['image']);
  assert.match(s.stderr, /; decoded: 0 by the sidecar, 1 here/);
  // A decline is decoded here and sent again.
  const declining = new DecodingReplayBackend();
  declining.decline = true;
  const d = await runInProcess(['detect', '--json', caseImage(CASES[0]!)], { backend: declining });
  assert.equal(d.code, 0, d.stderr);
  assert.deepEqual(declining.inputs, ['encoded', 'image']);
  assert.deepEqual(strip(d.stdout), strip(here.stdout).slice(0, 1));
  assert.match(d.stderr, /; decoded: 0 by the sidecar, 1 here/);
});

test('detect --json: NDJSON for two images given as a directory glob and a directory; stdin "-"', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-cli-'));
  try {
    fs.copyFileSync(caseImage('case-2'), path.join(tmp, 'b.png'));
    fs.mkdirSync(path.join(tmp, 'sub'));
    fs.copyFileSync(caseImage('case-3'), path.join(tmp, 'sub', 'c.png'));
    fs.writeFileSync(path.join(tmp, 'notes.txt'), 'not an image');
    const flat = await runInProcess(['detect', '--json', tmp], { cwd: tmp });
    assert.equal(flat.code, 0, flat.stderr);
    assert.deepEqual(lines(flat.stdout).map((l) => path.basename(l.image)), ['b.png'], 'directory: its image files only, not subdirectories');
    const rec = await runInProcess(['detect', '--json', '--recursive', '.'], { cwd: tmp });
    const ls = lines(rec.stdout);
    assert.deepEqual(ls.map((l) => l.image), ['b.png', path.join('sub', 'c.png')]);
    assertFixture(ls[0]!, 'case-2');
    assertFixture(ls[1]!, 'case-3');
    const glob = await runInProcess(['detect', '--json', '**/*.png'], { cwd: tmp });
    assert.deepEqual(lines(glob.stdout).map((l) => l.image), ['b.png', 'sub/c.png']);
    const stdin = await runInProcess(['detect', '--json', '-'], { stdin: fs.readFileSync(caseImage('case-1')) });
    const s = lines(stdin.stdout);
    assert.equal(s.length, 1);
    assert.equal(s[0]!.image, '-');
    assertFixture(s[0]!, 'case-1');
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('detect: --threshold, --max-detections and --classes (filter before the cap); unknown class is a usage error', async () => {
  const all = fixtureDetections('case-1').detections['0.3']!;
  const r = await runInProcess(['detect', '--json', '--threshold', '0.3', '--max-detections', '2', '--classes', 'banana,5', caseImage('case-1')]);
  assert.equal(r.code, 0, r.stderr);
  const [l] = lines(r.stdout);
  const want = all.filter((d) => d.label === 52 || d.label === 5).slice(0, 2);
  assert.ok(want.length === 2);
  assert.deepEqual(l!.detections.map((d) => [d.label_id, d.score]), want.map((d) => [d.label, d.score]));
  assert.equal(l!.num_detections, 2);
  assert.equal(l!.threshold, 0.3);
  const bad = await runInProcess(['detect', '--json', '--classes', 'cat,unicorn', caseImage('case-1')]);
  assert.equal(bad.code, 2);
  assert.equal(bad.stdout, '');
  assert.match(bad.stderr, /--classes: unknown class "unicorn"/);
});

test('detect --class-thresholds: those classes at their own threshold, the others at --threshold; an unknown class or a bad pair is a usage error', async () => {
  const d = fixtureDetections('case-1').detections;
  const at05 = new Set(d['0.5']!.map((x) => x.query));
  const want = d['0.3']!.filter((x) => x.label === 52 || at05.has(x.query));
  assert.ok(want.length > at05.size, 'the fixture has bananas between 0.3 and 0.5');
  const r = await runInProcess(['detect', '--json', '--max-detections', '300', '--class-thresholds', 'banana:0.3', caseImage('case-1')]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(lines(r.stdout)[0]!.detections.map((x) => x.score), want.map((x) => x.score));
  const unknown = await runInProcess(['detect', '--json', '--class-thresholds', 'unicorn:0.3', caseImage('case-1')]);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /--class-thresholds: unknown class "unicorn"/);
  const malformed = await runInProcess(['detect', '--json', '--class-thresholds', 'cat=0.3', caseImage('case-1')]);
  assert.equal(malformed.code, 2);
  assert.match(malformed.stderr, /expected class:threshold pairs .* but received "cat=0\.3"/);
});

test('detect --raw: logits [300][91] and pred_boxes [300][4] as full-precision numbers', async () => {
  const backend = new FixtureReplayBackend();
  const r = await runInProcess(['detect', '--json', '--raw', caseImage('case-2')], { backend });
  const [l] = lines(r.stdout);
  assert.equal(l!.raw!.logits.length, 300);
  assert.equal(l!.raw!.logits[7]!.length, 91);
  assert.equal(l!.raw!.pred_boxes[299]!.length, 4);
  const g = (await fixtureCases())[1]!;
  assert.equal(l!.raw!.logits[7]![13], g.logits[7 * 91 + 13]);
  assert.equal(l!.raw!.pred_boxes[299]![3], g.predBoxes[299 * 4 + 3]);
});

test('detect: table per image on stderr, stdout empty without --json; no progress bar unless stderr is a TTY', async () => {
  const r = await runInProcess(['detect', caseImage('case-1'), caseImage('case-2')]);
  assert.equal(r.code, 0);
  assert.equal(r.stdout, '');
  const top = fixtureDetections('case-1').detections['0.5']![0]!;
  assert.match(r.stderr, new RegExp(`case-1/input\\.png  640x480  ${fixtureDetections('case-1').detections['0.5']!.length} detections`));
  assert.match(r.stderr, new RegExp(`\\s1  ${top.label_name}\\s+${top.label}  ${top.score.toFixed(3)}`));
  assert.ok(!r.stderr.includes('\r') && !r.stderr.includes('\x1b'), 'no control characters when stderr is not a TTY');
  const tty = await runInProcess(['detect', '--json', caseImage('case-1'), caseImage('case-2')], { tty: true });
  assert.match(tty.stderr, /\r\x1b\[2K\[#{12}-{12}\] 1\/2 \d+\.\d s /, 'a bar with the elapsed time on a TTY');
  assert.equal(lines(tty.stdout).length, 2, 'the bar never reaches stdout');
});

test('detect: the engine start is told on stderr: redrawn with the elapsed time on a TTY, one plain line each way otherwise', async () => {
  const what = 'detect: starting the cpu engine (loading the weights, warm-up)';
  const esc = (s: string) => s.replace(/[()]/g, '\\$&');
  const plain = await runInProcess(['detect', '--json', caseImage('case-1')]);
  assert.equal(plain.code, 0, plain.stderr);
  assert.match(plain.stderr, new RegExp(`^${esc(what)} …\n`, 'm'));
  assert.match(plain.stderr, new RegExp(`^${esc(what)}: ready \\(fixture-replay on recorded outputs\\) in \\d+\\.\\d s\n`, 'm'));
  assert.ok(!plain.stderr.includes('\r') && !plain.stderr.includes('\x1b'));
  const tty = await runInProcess(['detect', '--json', caseImage('case-1')], { tty: true });
  assert.ok(tty.stderr.includes(`\r\x1b[2K${what} … 0.`), tty.stderr);
  assert.match(tty.stderr, new RegExp(`\r\x1b\\[2K${esc(what)}: ready .* in \\d+\\.\\d s\n`));
  const failed = await runInProcess(['detect', '--json', caseImage('case-1')], { factory: () => { throw new Error('no engine today'); } });
  assert.equal(failed.code, 1);
  assert.match(failed.stderr, new RegExp(`${esc(what)}: failed after \\d+\\.\\d s\n`));
  assert.match(failed.stderr, /no engine today/);
});

test('detect --save: annotated PNGs whose pixels on a detection\'s box edge carry the class colour', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-save-'));
  try {
    const r = await runInProcess(['detect', '--json', '--save', path.join(tmp, 'out'), caseImage('case-1'), caseImage('case-3')]);
    assert.equal(r.code, 0, r.stderr);
    const files = fs.readdirSync(path.join(tmp, 'out')).sort();
    assert.deepEqual(files, ['input-2.png', 'input.png'], 'same base name: the second gets -2');
    for (const [file, c] of [['input.png', 'case-1'], ['input-2.png', 'case-3']] as const) {
      const { data, info } = await sharp(path.join(tmp, 'out', file)).raw().toBuffer({ resolveWithObject: true });
      const want = fixtureDetections(c);
      assert.deepEqual([info.width, info.height], [want.image.width, want.image.height]);
      const top = want.detections['0.5']![0]!;
      const x = Math.floor(top.box_xyxy[0]!);
      const y = Math.floor((top.box_xyxy[1]! + top.box_xyxy[3]!) / 2);
      const o = (y * info.width + x) * info.channels;
      const got = [data[o]!, data[o + 1]!, data[o + 2]!];
      const col = classColour(top.label);
      assert.ok(got.every((v, k) => Math.abs(v - col[k]!) <= 2), `${file}: pixel (${x},${y}) on the left edge of the top box is ${got}, expected the class colour ${col}`);
      // and the image is otherwise the input: a far corner pixel of the original is unchanged
      const orig = await sharp(caseImage(c)).removeAlpha().raw().toBuffer({ resolveWithObject: true });
      const inside = (px: number, py: number) => want.detections['0.5']!.some((d) => px >= d.box_xyxy[0]! - 40 && px <= d.box_xyxy[2]! + 40 && py >= d.box_xyxy[1]! - 40 && py <= d.box_xyxy[3]! + 40);
      let checked = 0;
      for (let py = 0; py < info.height && checked < 50; py += 7) {
        for (let px = 0; px < info.width && checked < 50; px += 13) {
          if (inside(px, py)) continue;
          const q = (py * info.width + px) * 3;
          assert.deepEqual([data[(py * info.width + px) * info.channels], data[(py * info.width + px) * info.channels + 1]], [orig.data[q], orig.data[q + 1]], `untouched pixel (${px},${py})`);
          checked++;
        }
      }
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('detect --save: a symlink or a file not ours already in DIR is never written through or replaced', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-save-link-'));
  try {
    const out = path.join(tmp, 'out');
    fs.mkdirSync(out);
    const outside = path.join(tmp, 'outside.txt');
    fs.writeFileSync(outside, 'precious');
    fs.symlinkSync(outside, path.join(out, 'input.png'));
    const dangling = path.join(tmp, 'created-through-link');
    fs.symlinkSync(dangling, path.join(out, 'input-2.png'));
    const r = await runInProcess(['detect', '--json', '--save', out, caseImage('case-1'), caseImage('case-2'), caseImage('case-3')]);
    assert.equal(fs.readFileSync(outside, 'utf8'), 'precious', 'the file the link points at is untouched');
    assert.equal(fs.existsSync(dangling), false, 'nothing was created through a dangling link');
    assert.equal(fs.lstatSync(path.join(out, 'input.png')).isSymbolicLink(), true, 'the link itself is left alone');
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /input\.png is a symbolic link; refusing to replace it/);
    assert.match(r.stderr, /input-2\.png is a symbolic link; refusing to replace it/);
    assert.equal(lines(r.stdout).length, 3, 'every image was still detected');
    assert.ok((await sharp(path.join(out, 'input-3.png')).metadata()).width! > 0, 'the free name was written');
    assert.deepEqual(fs.readdirSync(out).filter((f) => f.endsWith('.tmp')), [], 'no temporary file left');
    if (process.getuid?.() === 0) {
      // As root: a regular file owned by another user is not ours to replace either.
      fs.rmSync(path.join(out, 'input.png'));
      fs.writeFileSync(path.join(out, 'input.png'), 'theirs');
      fs.chownSync(path.join(out, 'input.png'), 65534, 65534);
      const r2 = await runInProcess(['detect', '--json', '--save', out, caseImage('case-1')]);
      assert.equal(r2.code, 1);
      assert.match(r2.stderr, /input\.png is a file owned by uid 65534, not by this user/);
      assert.equal(fs.readFileSync(path.join(out, 'input.png'), 'utf8'), 'theirs');
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('detect: an unreadable image is reported by name and skipped; the others run; exit 1', async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-bad-'));
  try {
    const bad = path.join(tmp, 'broken.png');
    fs.writeFileSync(bad, fs.readFileSync(caseImage('case-1')).subarray(0, 300));
    const r = await runInProcess(['detect', '--json', caseImage('case-1'), bad, caseImage('case-2')]);
    assert.equal(r.code, 1);
    const ls = lines(r.stdout);
    assert.deepEqual(ls.map((l) => l.image), [caseImage('case-1'), caseImage('case-2')]);
    assert.match(r.stderr, new RegExp(`detect: ${bad.replace(/[.]/g, '\\.')}: image could not be decoded`));
    assert.match(r.stderr, /detect: 2 of 3 inputs detected, 1 failed in /);
    assert.match(r.stderr, /detect: 1 of 3 inputs failed \(failed: .*broken\.png\)/);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('detect: inputs naming nothing are reported and skipped, the others run, exit 1; counts agree; none at all starts nothing', async () => {
  const r = await runInProcess(['detect', '--json', 'missing-1.png', caseImage('case-1'), 'nowhere/*.jpg']);
  assert.equal(r.code, 1);
  assert.deepEqual(lines(r.stdout).map((l) => l.image), [caseImage('case-1')]);
  assert.match(r.stderr, /detect: skipped missing-1\.png: no such file or directory/);
  assert.match(r.stderr, /detect: skipped nowhere\/\*\.jpg: the pattern matches no image files/);
  assert.match(r.stderr, /detect: 1 of 3 inputs detected, 2 failed \(2 named no image\) in /);
  assert.match(r.stderr, /detect: 2 of 3 inputs failed \(named no image: 2\)/);
  const none = await runInProcess(['detect', '--json', 'missing-1.png', 'nowhere/*.jpg']);
  assert.equal(none.code, 1);
  assert.equal(none.stdout, '');
  assert.equal(none.requests.length, 0, 'no engine was opened');
  assert.match(none.stderr, /no input names an image or video \(2 skipped\); nothing was run/);
});

test('detect: --weights with --model is a usage error; bad values name the flag (exit 2)', async () => {
  const r = await runInProcess(['detect', '--weights', await synthWeights(), '--model', 'a/b', caseImage('case-1')]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--weights DIR .* cannot be combined with --model/);
  const m = await runInProcess(['detect', '--max-detections', '0', caseImage('case-1')]);
  assert.equal(m.code, 2);
  assert.match(m.stderr, /--max-detections <n>' argument '0' is invalid. expected an integer from 1 to 300/);
  const f = await runInProcess(['detect', '--mask-format', 'bitmap', caseImage('case-1')]);
  assert.equal(f.code, 2);
  assert.match(f.stderr, /--mask-format <format>' argument 'bitmap' is invalid. Allowed choices are rle, polygon, none/);
});

test('detect --url with --engine, --weights, --threads or --precision is refused (exit 2) naming the flags', async () => {
  const r = await runInProcess(['detect', '--url', 'http://127.0.0.1:9', '--engine', 'cpu', '--threads', '2', '--precision', 'bf16', '--weights', '/w', caseImage('case-1')]);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /--url sends the images to a running server.*; --engine, --threads, --precision, --weights cannot be combined with it/);
  assert.equal(r.requests.length, 0);
  const one = await runInProcess(['detect', '--url', 'http://127.0.0.1:9', '--model', 'a/b', caseImage('case-1')]);
  assert.equal(one.code, 2);
  assert.match(one.stderr, /; --model cannot be combined with it \(drop it,/);
});
