// POST /predict/video's route with a scripted video source (frames made here, counted, its close observed):
// one NDJSON line per frame in order then the summary; stills answered between a video's frames (the engine
// queue's order, held still with a blocked backend); track ids; the body forms; the limits (413, 422, 503);
// an engine failure as the last line; a client that leaves stops the decoding and removes the upload.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { OpenVideo } from '../../src/http/predict-video.ts';
import { RfdetrError } from '../../src/errors.ts';
import type { VideoFrame, VideoSource } from '../../src/video/source.ts';
import { goldens, start, u8, waitFor } from './helpers.ts';
import { holdForward, ndjsonLines as lines, postVideo as postUpload, stillsBehindVideo } from './video-helpers.ts';

const W = 320;
const H = 240;

interface Script {
  frames: number;
  fps?: number;
  /** What the "container" claims (default: the truth). */
  claimFrames?: number | null;
  durationMs?: number | null;
  /** The decoder's CPU time after each frame it has handed out, ms (decoderCpuMs); absent: not known. */
  decoderMsPerFrame?: number;
}

interface Observed {
  opened: string[];
  closed: number;
  /** Frames handed out by decode(). */
  yielded: number;
  /** decode() generators that finished (to the end or stopped). */
  finished: number;
  /** The upload's bytes as the source saw them. */
  bytes: number[];
}

function scriptedVideo(script: Script): { open: OpenVideo; seen: Observed } {
  const seen: Observed = { opened: [], closed: 0, yielded: 0, finished: 0, bytes: [] };
  const fps = script.fps ?? 30;
  const open: OpenVideo = async (file, opts) => {
    seen.opened.push(file);
    seen.bytes.push(fs.statSync(file).size);
    const stride = opts.stride ?? 1;
    const frames = script.claimFrames === undefined ? script.frames : script.claimFrames;
    const durationMs = script.durationMs === undefined ? (script.frames * 1000) / fps : script.durationMs;
    let yielded = 0;
    const source: VideoSource = {
      info: {
        width: W, height: H, fps, rotation: 0, hasAudio: false, codec: 'scripted', container: 'scripted',
        ...(frames === null ? {} : { frameCount: frames }), ...(durationMs === null ? {} : { durationMs }),
      },
      fps,
      get frames() {
        return yielded;
      },
      async *[Symbol.asyncIterator]() {
        try {
          for (let i = 0; i < script.frames; i += stride) {
            if (opts.signal?.aborted) throw opts.signal.reason;
            const rgb = Buffer.alloc(W * H * 3, i % 256);
            seen.yielded++;
            yielded++;
            yield { index: i, ptsMs: (i * 1000) / fps, width: W, height: H, rgb } satisfies VideoFrame;
          }
        } finally {
          seen.finished++;
        }
      },
      async close() {
        seen.closed++;
      },
      ...(script.decoderMsPerFrame === undefined ? {} : { decoderCpuMs: () => yielded * script.decoderMsPerFrame! }),
    };
    return source;
  };
  return { open, seen };
}

const VIDEO_BYTES = Buffer.from('not really a video: the scripted source ignores the bytes');

function postVideo(url: string, query: string, body: BodyInit = u8(VIDEO_BYTES), headers?: Record<string, string>, signal?: AbortSignal) {
  return postUpload(url, query, body, headers, signal);
}

function tmpRoot(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-video-test-'));
}

test('POST /predict/video: one NDJSON line per frame, in order, then the summary; the upload is removed', { timeout: 60_000 }, async () => {
  const { open, seen } = scriptedVideo({ frames: 150 });
  const root = tmpRoot();
  const s = await start({ openVideo: open, videoTmpRoot: root });
  try {
    const res = await postVideo(s.url, '?threshold=0.3');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^application\/x-ndjson/);
    const out = lines(await res.text());
    assert.equal(out.length, 151);
    out.slice(0, 150).forEach((l, i) => {
      assert.equal(l.frame, i);
      assert.equal(l.pts_ms, (i * 1000) / 30);
      assert.deepEqual(l.image_size, { width: W, height: H });
      assert.equal(l.num_detections, l.detections.length);
      assert.ok(l.detections.length > 0);
      assert.ok(l.detections.every((d: any) => d.score > 0.3 && !('track_id' in d)));
    });
    const sum = out[150].summary;
    assert.equal(sum.frames, 150);
    assert.equal(sum.detections, out.slice(0, 150).reduce((n, l) => n + l.num_detections, 0));
    assert.deepEqual([sum.width, sum.height, sum.fps, sum.stride, sum.tracked], [W, H, 30, 1, false]);
    assert.equal(s.backend.calls, 150);
    assert.deepEqual(seen.bytes, [VIDEO_BYTES.length]);
    assert.equal(seen.closed, 1);
    assert.deepEqual(fs.readdirSync(root), []);
  } finally {
    await s.stop();
  }
});

test('POST /predict/video: each frame line carries the timing_ms stages of a /predict image, in the same key order', { timeout: 60_000 }, async () => {
  const { open } = scriptedVideo({ frames: 3 });
  const s = await start({ openVideo: open, videoTmpRoot: tmpRoot() });
  try {
    s.backend.forwardMs = 12;
    const still = await fetch(`${s.url}/predict`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: u8(goldens()[0]!.png) });
    assert.equal(still.status, 200);
    const stages = Object.keys(((await still.json()) as { timing_ms: object }).timing_ms);
    assert.deepEqual([...stages].sort(), ['decode', 'inference', 'postprocess', 'preprocess', 'queue', 'total', 'transfer']);
    const out = lines(await (await postVideo(s.url, '')).text());
    assert.equal(out.length, 4);
    for (const l of out.slice(0, 3)) {
      assert.deepEqual(Object.keys(l.timing_ms), stages, `frame ${l.frame}: the /predict stages in its order`);
      for (const k of stages) assert.ok(typeof l.timing_ms[k] === 'number' && l.timing_ms[k] >= 0, `frame ${l.frame}: ${k}=${l.timing_ms[k]}`);
      assert.equal(l.timing_ms.inference, 12, 'inference is the backend\'s forward time');
      assert.equal(l.timing_ms.transfer, 0.25, 'transfer is the backend\'s');
    }
  } finally {
    await s.stop();
  }
});

test('POST /predict/video: the decoder\'s CPU time is charged to the video\'s client in the fair share', { timeout: 60_000 }, async () => {
  const { open } = scriptedVideo({ frames: 20, decoderMsPerFrame: 7 });
  const s = await start({ openVideo: open });
  const charged = new Map<string, number>();
  const charge = s.srv.engine.charge.bind(s.srv.engine);
  s.srv.engine.charge = (client, ms) => {
    charged.set(client, (charged.get(client) ?? 0) + ms);
    charge(client, ms);
  };
  try {
    const res = await postVideo(s.url, '');
    assert.equal(lines(await res.text()).length, 21);
    // read before each frame goes to the engine: 7 ms for each of the 20 frames, all to the one client
    assert.deepEqual([...charged.values()], [7 * 20]);
  } finally {
    await s.stop();
  }
});

test('POST /predict/video: stills sent while a video runs are answered between its frames', { timeout: 60_000 }, async () => {
  const { open } = scriptedVideo({ frames: 150 });
  const s = await start({ openVideo: open });
  const order: string[] = [];
  const respond = s.backend.respond;
  s.backend.respond = (input) => {
    order.push('image' in input && input.image.width === W ? 'frame' : 'still');
    return respond(input);
  };
  try {
    const release = s.backend.block();
    const video = postVideo(s.url, '');
    // frame 0 in the engine, frame 1 waiting: the video keeps two frames in the queue
    await waitFor(() => s.backend.calls === 1 && s.srv.engine.depth === 1, 'the video\'s first two frames');
    await stillsBehindVideo(s, 1, release);
    const res = await video;
    const out = lines(await res.text());
    assert.deepEqual(out.slice(0, 150).map((l) => l.frame), Array.from({ length: 150 }, (_, i) => i));
    assert.equal(out[150].summary.frames, 150);
    // the engine took: frame 0, frame 1, the three stills, then the rest of the video
    assert.deepEqual(order.slice(0, 6), ['frame', 'frame', 'still', 'still', 'still', 'frame']);
    assert.equal(order.length, 153);
  } finally {
    await s.stop();
  }
});

test('POST /predict/video: track=true puts a track id on every detection; stride keeps the source index', { timeout: 60_000 }, async () => {
  const { open, seen } = scriptedVideo({ frames: 30 });
  const s = await start({ openVideo: open });
  try {
    const out = lines(await (await postVideo(s.url, '?track=true&stride=3&max_detections=4')).text());
    assert.deepEqual(out.slice(0, -1).map((l) => l.frame), [0, 3, 6, 9, 12, 15, 18, 21, 24, 27]);
    assert.equal(seen.yielded, 10);
    const frames = out.slice(0, -1);
    assert.ok(frames.every((l) => l.detections.length === 4 && l.detections.every((d: any) => 'track_id' in d)));
    // the same detections every frame: unconfirmed on the first, then one stable id each (the fifth box of
    // the fixture lies outside the frame: a zero-width box overlaps nothing, so it is never tracked)
    assert.ok(frames[0].detections.every((d: any) => d.track_id === null));
    const ids = frames[1].detections.map((d: any) => d.track_id);
    assert.ok(ids.every((id: unknown) => Number.isInteger(id)));
    assert.equal(new Set(ids).size, 4);
    for (const l of frames.slice(2)) assert.deepEqual(l.detections.map((d: any) => d.track_id), ids);
    assert.deepEqual([out.at(-1).summary.tracked, out.at(-1).summary.stride], [true, 3]);
  } finally {
    await s.stop();
  }
});

test('POST /predict/video: multipart with a "video" part and text fields; without one, 422 naming it', { timeout: 60_000 }, async () => {
  const { open, seen } = scriptedVideo({ frames: 4 });
  const s = await start({ openVideo: open });
  try {
    const fd = new FormData();
    fd.set('threshold', '0.9');
    fd.set('video', new Blob([u8(VIDEO_BYTES)], { type: 'video/mp4' }), 'clip.mp4');
    fd.set('stride', '2');
    const res = await fetch(`${s.url}/predict/video`, { method: 'POST', body: fd });
    assert.equal(res.status, 200);
    const out = lines(await res.text());
    assert.deepEqual(out.slice(0, -1).map((l) => l.frame), [0, 2]);
    assert.ok(out[0].detections.every((d: any) => d.score > 0.9));
    assert.deepEqual(seen.bytes, [VIDEO_BYTES.length]);
    const none = new FormData();
    none.set('threshold', '0.5');
    const r2 = await fetch(`${s.url}/predict/video`, { method: 'POST', body: none });
    assert.equal(r2.status, 422);
    const b2 = (await r2.json()) as any;
    assert.equal(b2.code, 'E_SCHEMA');
    assert.match(b2.detail, /file part named "video"/);
    const other = new FormData();
    other.set('image', new Blob([u8(VIDEO_BYTES)]), 'x.png');
    const r3 = await fetch(`${s.url}/predict/video`, { method: 'POST', body: other });
    assert.equal(r3.status, 422);
    assert.match(((await r3.json()) as any).detail, /named "video" but received a file part named "image"/);
  } finally {
    await s.stop();
  }
});

test('POST /predict/video: 415, 413, 422 (options, duration, frames) and 503 (videos at once), each before any line', { timeout: 60_000 }, async () => {
  const root = tmpRoot();
  const { open, seen } = scriptedVideo({ frames: 40, claimFrames: 40, durationMs: 1000 });
  const s = await start({ openVideo: open, videoTmpRoot: root, videoLimits: { maxBytes: 1000, maxFrames: 30, maxDurationS: 5, maxVideos: 1 } });
  const error = async (r: Response) => ({ status: r.status, body: (await r.json()) as any });
  try {
    let e = await error(await postVideo(s.url, '', u8(VIDEO_BYTES), { 'content-type': 'text/plain' }));
    assert.equal(e.status, 415);
    assert.match(e.body.detail, /Expected Content-Type video\/\*.*but received "text\/plain"/);
    e = await error(await postVideo(s.url, '', u8(Buffer.alloc(5000))));
    assert.equal(e.status, 413);
    assert.equal(e.body.code, 'E_BODY_TOO_LARGE');
    assert.match(e.body.detail, /larger than the 1000-byte limit .*--video-max-bytes/);
    e = await error(await postVideo(s.url, '?stride=0'));
    assert.equal(e.status, 422);
    assert.deepEqual([e.body.code, e.body.field], ['E_SCHEMA', 'stride']);
    e = await error(await postVideo(s.url, '?track=maybe'));
    assert.deepEqual([e.status, e.body.field], [422, 'track']);
    e = await error(await postVideo(s.url, ''));
    assert.equal(e.status, 422);
    assert.equal(e.body.code, 'E_VIDEO_TOO_LONG');
    assert.match(e.body.detail, /has 40 frames; the limit is 30 frames \(--video-max-frames\)/);
    assert.equal(seen.yielded, 0);
    assert.deepEqual(fs.readdirSync(root), []);
  } finally {
    await s.stop();
  }
  const long = scriptedVideo({ frames: 10, durationMs: 9000 });
  const s2 = await start({ openVideo: long.open, videoLimits: { maxDurationS: 5, maxVideos: 1 } });
  try {
    const e = await error(await postVideo(s2.url, ''));
    assert.equal(e.status, 422);
    assert.match(e.body.detail, /lasts 9.000 s; the limit is 5 s \(--video-max-duration-s\)/);
    // one video at a time: a second one while the first is held in the engine is 503 with Retry-After
    const release = s2.backend.block();
    const short = scriptedVideo({ frames: 3 });
    const s3 = await start({ openVideo: short.open, backend: s2.backend, videoLimits: { maxVideos: 1 } });
    try {
      const first = postVideo(s3.url, '');
      await waitFor(() => s2.backend.calls >= 1, 'the first video in the engine');
      const second = await postVideo(s3.url, '');
      assert.equal(second.status, 503);
      assert.ok(Number(second.headers.get('retry-after')) >= 1);
      assert.match(((await second.json()) as any).detail, /1 videos are being processed \(--video-max-concurrent\)/);
      release();
      assert.equal(lines(await (await first).text()).at(-1).summary.frames, 3);
    } finally {
      release();
      await s3.stop();
    }
  } finally {
    await s2.stop().catch(() => {});
  }
});

test('POST /predict/video: a frame count the container does not give is enforced on the decoded frames', { timeout: 60_000 }, async () => {
  const { open, seen } = scriptedVideo({ frames: 40, claimFrames: null, durationMs: null });
  const s = await start({ openVideo: open, videoLimits: { maxFrames: 25 } });
  try {
    const res = await postVideo(s.url, '');
    assert.equal(res.status, 200);
    const out = lines(await res.text());
    assert.equal(out.length, 26);
    assert.equal(out.at(-1).error.code, 'E_VIDEO_TOO_LONG');
    assert.match(out.at(-1).error.detail, /more than 25 frames/);
    assert.equal(seen.finished, 1);
    assert.ok(seen.yielded <= 26);
  } finally {
    await s.stop();
  }
});

test('POST /predict/video: an engine failure mid-video is the last line, with the code and status it would have had', { timeout: 60_000 }, async () => {
  const { open, seen } = scriptedVideo({ frames: 20 });
  const s = await start({ openVideo: open });
  const respond = s.backend.respond;
  s.backend.respond = (input) => {
    if (s.backend.calls === 6) throw new Error('the engine broke');
    return respond(input);
  };
  try {
    const res = await postVideo(s.url, '');
    const out = lines(await res.text());
    assert.deepEqual(out.slice(0, -1).map((l) => l.frame), [0, 1, 2, 3, 4]);
    const err = out.at(-1).error;
    assert.deepEqual([err.code, err.status], ['E_INFERENCE', 500]);
    assert.match(err.detail, /inference failed: Error: the engine broke/);
    assert.equal(typeof err.request_id, 'string');
    assert.equal(seen.closed, 1);
    assert.equal(seen.finished, 1);
  } finally {
    await s.stop();
  }
});

test('POST /predict/video: a client that leaves stops the decoding, costs no more forwards and leaves no file', { timeout: 60_000 }, async () => {
  const root = tmpRoot();
  const { open, seen } = scriptedVideo({ frames: 10_000 });
  const s = await start({ openVideo: open, videoTmpRoot: root });
  try {
    // the sixth forward is held: frames 0-4 answered, frame 5 in the engine, frame 6 waiting
    const unblock = holdForward(s, 6);
    const ac = new AbortController();
    const res = await postVideo(s.url, '', u8(VIDEO_BYTES), { 'content-type': 'application/octet-stream' }, ac.signal);
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    let got = '';
    while (got.split('\n').length <= 5) got += new TextDecoder().decode((await reader.read()).value);
    await waitFor(() => s.srv.engine.inFlight === 1 && s.srv.engine.depth === 1, 'frame 5 in the engine and frame 6 waiting');
    ac.abort();
    await waitFor(() => seen.closed === 1 && seen.finished === 1, 'the source closed and its decoding stopped');
    unblock();
    await waitFor(() => fs.readdirSync(root).length === 0 && s.srv.engine.depth === 0 && s.srv.engine.inFlight === 0, 'the upload removed and the engine idle');
    assert.equal(s.backend.calls, 6, 'frame 6 was dropped without a forward');
    assert.ok(seen.yielded <= 8, `${seen.yielded} frames decoded`);
    assert.ok(s.logs.some((l) => l.route === '/predict/video' && l.client_closed === true));
  } finally {
    await s.stop();
  }
});

test('POST /predict/video: an error that names the upload\'s temporary path reaches the client without it; the log keeps it', { timeout: 60_000 }, async () => {
  const root = tmpRoot();
  let named = '';
  const failing: Array<(file: string) => Error> = [
    (file) => new RfdetrError('E_VIDEO_UNDECODABLE', `"${file}" is not a readable video (ffprobe: ${file}: Invalid data found when processing input)`),
    (file) => Object.assign(new Error(`ENOENT: no such file or directory, open '${file}'`), { code: 'ENOENT' }),
  ];
  let which = 0;
  const open: OpenVideo = async (file) => {
    named = file;
    throw failing[which]!(file);
  };
  const s = await start({ openVideo: open, videoTmpRoot: root });
  try {
    for (const [i, [status, code]] of ([[400, 'E_VIDEO_UNDECODABLE'], [500, 'E_INTERNAL']] as const).entries()) {
      which = i;
      const res = await postVideo(s.url, '');
      const text = await res.text();
      assert.equal(res.status, status, text);
      assert.equal(JSON.parse(text).code, code);
      assert.ok(named.startsWith(root), named);
      assert.ok(!text.includes(root) && !text.includes('rfdetr-video-'), `no server path in ${text}`);
      assert.match(JSON.parse(text).detail, /\(a server path\)/);
      assert.ok(JSON.stringify(s.logs).includes(named), 'the log keeps the path');
    }
    assert.deepEqual(fs.readdirSync(root), []);
  } finally {
    await s.stop();
  }
});
