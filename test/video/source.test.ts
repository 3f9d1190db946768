import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { isRfdetrError, type ErrorCode } from '../../src/errors.ts';
import { openVideo, type OpenVideoOptions, type VideoFrame } from '../../src/video/source.ts';
import { probeVideo } from '../../src/video/probe.ts';
import { makeVideo, videoSkip } from '../helpers/videos.ts';

const skip = videoSkip();
let dir = '';
let tmp = '';
const savedTmp = process.env.TMPDIR;

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'video-test-'));
  // The sources' own temporary directories go here, so the tests can see that they are removed.
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'video-spool-'));
  process.env.TMPDIR = tmp;
});
after(() => {
  process.env.TMPDIR = savedTmp;
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function frames(input: string | NodeJS.ReadableStream, opts: OpenVideoOptions = {}): Promise<VideoFrame[]> {
  const src = await openVideo(input, opts);
  const out: VideoFrame[] = [];
  for await (const f of src) out.push(f);
  return out;
}

async function rejectsWith(p: Promise<unknown>, code: ErrorCode, message: RegExp): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(isRfdetrError(e, code), `expected ${code} but got ${String(e)}`);
    assert.match((e as Error).message, message);
    return true;
  });
}

for (const name of ['clip.mp4', 'clip.mkv', 'clip.webm', 'clip.ts']) {
  test(`video source: ${name}: every frame, in order, RGB24 at the probed size`, skip, async () => {
    const file = makeVideo(dir, name, { frames: 12, audio: true });
    const info = await probeVideo(file);
    assert.equal(info.width, 64);
    assert.equal(info.height, 48);
    assert.equal(info.fps, 30);
    assert.equal(info.hasAudio, true);
    const src = await openVideo(file);
    const got: VideoFrame[] = [];
    // what the route charges the client for the decoding, read at each frame as it does (a tiny clip may take < 1 tick)
    const cpu: Array<number | null> = [];
    for await (const f of src) {
      got.push(f);
      cpu.push(src.decoderCpuMs?.() ?? null);
    }
    assert.ok(cpu.every((c, i) => c !== null && c >= (cpu[i - 1] ?? 0)), `ffmpeg's CPU time known at every frame, never going back: ${cpu.join(' ')}`);
    await src.close();
    assert.deepEqual(got.map((f) => f.index), [...Array(12).keys()]);
    for (const f of got) {
      assert.equal(f.width, 64);
      assert.equal(f.height, 48);
      assert.equal(f.rgb.length, 64 * 48 * 3);
    }
    const pts = got.map((f) => f.ptsMs - got[0]!.ptsMs);
    pts.forEach((p, i) => assert.ok(Math.abs(p - (i * 1000) / 30) < 1.5, `frame ${i} at ${p} ms, expected ${(i * 1000) / 30}`));
  });
}

test('video source: the pixels are the picture (a red video decodes to red RGB)', skip, async () => {
  const file = makeVideo(dir, 'red.mp4', { source: 'color=c=red', frames: 3 });
  const [f] = await frames(file);
  const px = f!.rgb;
  let r = 0, g = 0, b = 0;
  for (let i = 0; i < px.length; i += 3) { r += px[i]!; g += px[i + 1]!; b += px[i + 2]!; }
  const n = px.length / 3;
  assert.ok(r / n > 230 && g / n < 30 && b / n < 30, `mean RGB ${[r / n, g / n, b / n].map((v) => v.toFixed(0))}, expected red`);
});

test('video source: stride, max frames, start and duration select the frames they say', skip, async () => {
  const file = makeVideo(dir, 'sel.mp4', { frames: 15 });
  assert.deepEqual((await frames(file, { stride: 4 })).map((f) => f.index), [0, 4, 8, 12]);
  assert.deepEqual((await frames(file, { maxFrames: 3 })).map((f) => f.index), [0, 1, 2]);
  const part = await frames(file, { startMs: 200, durationMs: 200 });
  assert.deepEqual(part.map((f) => f.index), [0, 1, 2, 3, 4, 5]);
  assert.ok(Math.abs(part[0]!.ptsMs - 200) < 1.5, `first pts ${part[0]!.ptsMs}, expected 200`);
});

test('video source: a rotated stream is decoded upright (sizes swapped, as probed)', skip, async () => {
  const file = makeVideo(dir, 'plain.mp4', { frames: 2 });
  const rot = path.join(dir, 'rot.mp4');
  const { execFileSync } = await import('node:child_process');
  execFileSync('ffmpeg', ['-v', 'error', '-y', '-i', file, '-c', 'copy', '-metadata:s:v:0', 'rotate=90', rot]);
  const info = await probeVideo(rot);
  assert.equal(info.rotation % 180, 90);
  assert.deepEqual([info.width, info.height], [48, 64]);
  const got = await frames(rot);
  assert.deepEqual(got.map((f) => [f.width, f.height]), [[48, 64], [48, 64]]);
});

test('video source: a byte stream is spooled, decoded, and its temporary file removed', skip, async () => {
  const file = makeVideo(dir, 'stream.mkv', { frames: 5 });
  const got = await frames(fs.createReadStream(file));
  assert.equal(got.length, 5);
  assert.deepEqual(fs.readdirSync(tmp), []);
  await rejectsWith(frames(fs.createReadStream(file), { maxBytes: 100 }), 'E_VIDEO_TOO_LARGE', /over 100 bytes/);
  assert.deepEqual(fs.readdirSync(tmp), []);
});

test('video source: not a video, truncated, and a header claiming huge frames are refused by name', skip, async () => {
  const txt = path.join(dir, 'notes.txt');
  fs.writeFileSync(txt, 'these are not frames\n'.repeat(50));
  await rejectsWith(openVideo(txt), 'E_VIDEO_UNDECODABLE', /notes\.txt.*not a video.*expected a video/);

  const whole = makeVideo(dir, 'whole.mp4', { frames: 60 });
  const cut = path.join(dir, 'cut.mp4');
  fs.writeFileSync(cut, fs.readFileSync(whole).subarray(0, Math.floor(fs.statSync(whole).size * 0.6)));
  const src = await openVideo(cut);
  let n = 0;
  await rejectsWith((async () => { for await (const _ of src) n++; })(), 'E_VIDEO_UNDECODABLE', /truncated.*header promises 60/);
  assert.ok(n < 60, `a cut file gave ${n} frames`);

  // A YUV4MPEG header is plain text: the claim costs nothing to write.
  const big = path.join(dir, 'big.y4m');
  fs.writeFileSync(big, Buffer.from('YUV4MPEG2 W9000 H100 F30:1 C420jpeg\nFRAME\nxyz'));
  await rejectsWith(openVideo(big), 'E_VIDEO_TOO_LARGE', /9000x100 pixels.*at most 8192/);
  const huge = path.join(dir, 'huge.y4m');
  fs.writeFileSync(huge, Buffer.from('YUV4MPEG2 W100000 H100000 F30:1 C420jpeg\nFRAME\nxyz'));
  await assert.rejects(openVideo(huge), (e: unknown) => isRfdetrError(e, 'E_VIDEO_UNDECODABLE') || isRfdetrError(e, 'E_VIDEO_TOO_LARGE'));
});

test('video source: a stream that never answers fails at the deadline with E_VIDEO_TIMEOUT', skip, async () => {
  const sockets: net.Socket[] = [];
  const server = net.createServer((s) => sockets.push(s)); // accepts, never sends a byte
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  try {
    await rejectsWith(openVideo(`tcp://127.0.0.1:${port}`, { timeoutMs: 300 }), 'E_VIDEO_TIMEOUT', /did not answer within 300 ms/);
    const src = await openVideo(`tcp://127.0.0.1:${port}`, { timeoutMs: 300, noProbe: true });
    await rejectsWith((async () => { for await (const _ of src) { /* none */ } })(), 'E_VIDEO_TIMEOUT', /sent no frame for 300 ms/);
  } finally {
    for (const s of sockets) s.destroy();
    server.close();
  }
});

test('video source: aborting ends the decode with E_ABORTED', skip, async () => {
  const file = makeVideo(dir, 'long.mp4', { frames: 90 });
  const ac = new AbortController();
  const src = await openVideo(file, { signal: ac.signal });
  let n = 0;
  await rejectsWith((async () => { for await (const _ of src) if (++n === 2) ac.abort(); })(), 'E_ABORTED', /aborted/);
  assert.equal(n, 2);
});

test('video source: without ffmpeg the error names the package to install', async () => {
  const env = { ...process.env, RFDETR_FFPROBE: path.join(os.tmpdir(), 'no-such-ffprobe'), RFDETR_FFMPEG: path.join(os.tmpdir(), 'no-such-ffmpeg') };
  await rejectsWith(openVideo('whatever.mp4', { env }), 'E_FFMPEG_MISSING', /no-such-ffprobe.*ffmpeg package \(sudo apt-get install -y ffmpeg\).*Still images do not need it/);
  const src = await openVideo('whatever.mp4', { env, noProbe: true });
  await rejectsWith((async () => { for await (const _ of src) { /* none */ } })(), 'E_FFMPEG_MISSING', /no-such-ffmpeg.*apt-get install -y ffmpeg/);
});
