// POST /predict/video with the real frame source (ffprobe + ffmpeg, src/video) on small testsrc videos made
// here: a 150-frame file streams one line per frame while stills sent at the same time are answered (the
// engine queue's order, held still at one frame); a client that leaves ends ffmpeg and leaves no file; not a
// video, a truncated file, and a video over the frame limit are answered with their codes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { start, u8, waitFor } from './helpers.ts';
import { holdForward, ndjsonLines as lines, postVideo, stillsBehindVideo } from './video-helpers.ts';
import { makeVideo, videoSkip } from '../helpers/videos.ts';

const skip = videoSkip();
let dir = '';

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'predict-video-'));
});
after(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

function tmpRoot(): string {
  return fs.mkdtempSync(path.join(dir, 'uploads-'));
}

/** ffmpeg processes whose parent is this process (read from /proc). */
function ffmpegChildren(): number[] {
  const out: number[] = [];
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const m = /^\d+ \((.*)\) \S (\d+)/.exec(stat);
      if (m && m[1] === 'ffmpeg' && Number(m[2]) === process.pid) out.push(Number(pid));
    } catch {
      // the process ended while being read
    }
  }
  return out;
}

const post = (url: string, query: string, body: Buffer, signal?: AbortSignal) => postVideo(url, query, u8(body), undefined, signal);


test('POST /predict/video (ffmpeg): a 150-frame file streams one line per frame while stills sent meanwhile are answered', { ...skip, timeout: 60_000 }, async () => {
  const file = makeVideo(dir, 'clip150.mp4', { width: 160, height: 120, frames: 150 });
  const root = tmpRoot();
  const s = await start({ videoTmpRoot: root });
  const order: string[] = [];
  let unblock!: () => void;
  const held = new Promise<void>((r) => (unblock = r));
  const respond = s.backend.respond;
  s.backend.respond = async (input) => {
    const isFrame = 'image' in input && input.image.width === 160;
    order.push(isFrame ? 'frame' : 'still');
    if (isFrame && order.length === 3) await held; // frame 2 stays in the engine
    return respond(input);
  };
  try {
    const video = post(s.url, '?track=1', fs.readFileSync(file));
    await waitFor(() => order.length === 3 && s.srv.engine.depth === 1, 'frame 2 in the engine, frame 3 waiting');
    await stillsBehindVideo(s, 1, unblock);
    const res = await video;
    assert.equal(res.status, 200);
    const out = lines(await res.text());
    assert.equal(out.length, 151);
    assert.deepEqual(out.slice(0, 150).map((l) => l.frame), Array.from({ length: 150 }, (_, i) => i));
    assert.deepEqual(out[10].image_size, { width: 160, height: 120 });
    assert.equal(out[30].pts_ms, 1000);
    assert.ok(out.slice(0, 150).every((l) => l.detections.every((d: any) => 'track_id' in d)));
    assert.deepEqual([out[150].summary.frames, out[150].summary.fps, out[150].summary.width], [150, 30, 160]);
    assert.deepEqual(order.slice(0, 8), ['frame', 'frame', 'frame', 'frame', 'still', 'still', 'still', 'frame']);
    assert.equal(order.length, 153);
    assert.deepEqual(fs.readdirSync(root), []);
    assert.deepEqual(ffmpegChildren(), []);
  } finally {
    unblock();
    await s.stop();
  }
});

test('POST /predict/video (ffmpeg): a client that leaves mid-video ends ffmpeg and removes the upload', { ...skip, timeout: 60_000 }, async () => {
  const file = makeVideo(dir, 'clip600.mp4', { width: 64, height: 48, frames: 600 });
  const root = tmpRoot();
  const s = await start({ videoTmpRoot: root });
  const unblock = holdForward(s, 6);
  try {
    const ac = new AbortController();
    const res = await post(s.url, '', fs.readFileSync(file), ac.signal);
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    let got = '';
    while (got.split('\n').length <= 5) got += new TextDecoder().decode((await reader.read()).value);
    await waitFor(() => s.srv.engine.inFlight === 1 && s.srv.engine.depth === 1, 'frame 5 in the engine and frame 6 waiting');
    assert.equal(ffmpegChildren().length, 1, 'ffmpeg is decoding while the client is there');
    assert.equal(fs.readdirSync(root).length, 1);
    ac.abort();
    await waitFor(() => ffmpegChildren().length === 0 && fs.readdirSync(root).length === 0, 'ffmpeg ended and the upload removed');
    unblock();
    await waitFor(() => s.srv.engine.depth === 0 && s.srv.engine.inFlight === 0, 'the engine idle');
    assert.equal(s.backend.calls, 6, 'no forward after the client left');
  } finally {
    unblock();
    await s.stop();
  }
});

test('POST /predict/video (ffmpeg): not a video is 400, a truncated file ends with an error line, too many frames is 422', { ...skip, timeout: 60_000 }, async () => {
  const root = tmpRoot();
  const s = await start({ videoTmpRoot: root, videoLimits: { maxFrames: 20 } });
  try {
    const junk = await post(s.url, '', Buffer.from('this is text, not a video\n'.repeat(100)));
    assert.equal(junk.status, 400);
    const jb = (await junk.json()) as any;
    assert.equal(jb.code, 'E_VIDEO_UNDECODABLE');
    // The upload is named as such, never by its temporary path (ffprobe's own words included).
    assert.match(jb.detail, /^the uploaded video is not a readable video \(ffprobe: /);
    assert.ok(!JSON.stringify(jb).includes(root) && !JSON.stringify(jb).includes('rfdetr-video-'), jb.detail);
    const long = makeVideo(dir, 'clip30.mp4', { frames: 30 });
    const tooMany = await post(s.url, '', fs.readFileSync(long));
    assert.equal(tooMany.status, 422);
    const tb = (await tooMany.json()) as any;
    assert.equal(tb.code, 'E_VIDEO_TOO_LONG');
    assert.match(tb.detail, /has 30 frames; the limit is 20 frames/);
    const ten = fs.readFileSync(makeVideo(dir, 'clip10.mp4', { frames: 10, width: 320, height: 240 }));
    const cut = await post(s.url, '', ten.subarray(0, Math.floor(ten.length * 0.6)));
    if (cut.status === 200) {
      const out = lines(await cut.text());
      assert.ok(out.length < 11, `${out.length} lines from a cut file`);
      assert.equal(out.at(-1).error.code, 'E_VIDEO_UNDECODABLE');
      assert.ok(!JSON.stringify(out.at(-1)).includes(root), out.at(-1).error.detail);
      assert.deepEqual(out.slice(0, -1).map((l: any) => l.frame), out.slice(0, -1).map((_: unknown, i: number) => i));
    } else {
      assert.equal(cut.status, 400);
      const cb = (await cut.json()) as any;
      assert.equal(cb.code, 'E_VIDEO_UNDECODABLE');
      assert.ok(!JSON.stringify(cb).includes(root), cb.detail);
    }
    assert.deepEqual(fs.readdirSync(root), []);
    assert.deepEqual(ffmpegChildren(), []);
  } finally {
    await s.stop();
  }
});
