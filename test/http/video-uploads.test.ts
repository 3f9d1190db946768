// POST /predict/video uploads before their video slot (src/http/video-uploads.ts): uploads that trickle in
// and never end hold no slot, so a real video is served beside them; one client's uploads are capped; an
// upload below the minimum rate (after its grace) or past the upload timeout is dropped with 408; the bytes of
// uploads on disk are held to the disk budget. Time is a clock the test moves: nothing here waits on the wall.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { OpenVideo } from '../../src/http/predict-video.ts';
import type { UploadClock } from '../../src/http/video-uploads.ts';
import type { VideoSource } from '../../src/video/source.ts';
import { start, u8, waitFor } from './helpers.ts';
import { ndjsonLines, postVideo } from './video-helpers.ts';

/** A clock that stands still until the test moves it; moving it runs the sweeps that are due. */
class HandClock implements UploadClock {
  t = 0;
  readonly #every = new Set<{ ms: number; next: number; fn: () => void }>();
  now(): number {
    return this.t;
  }
  every(ms: number, fn: () => void): () => void {
    const e = { ms, next: this.t + ms, fn };
    this.#every.add(e);
    return () => this.#every.delete(e);
  }
  /** Moves to `t`, running each sweep that falls due on the way. */
  moveTo(t: number): void {
    for (const e of [...this.#every]) {
      while (e.next <= t && this.#every.has(e)) {
        this.t = e.next;
        e.fn();
        e.next += e.ms;
      }
    }
    this.t = t;
  }
}

/** A scripted video of `frames` 64x48 frames (the upload's bytes are not read). */
function scripted(frames: number): OpenVideo {
  return async (_file, opts) => {
    let yielded = 0;
    const source: VideoSource = {
      info: { width: 64, height: 48, fps: 10, rotation: 0, hasAudio: false, codec: 'scripted', container: 'scripted', frameCount: frames, durationMs: frames * 100 },
      fps: 10,
      get frames() {
        return yielded;
      },
      async *[Symbol.asyncIterator]() {
        for (let i = 0; i < frames; i++) {
          if (opts.signal?.aborted) throw opts.signal.reason;
          yielded++;
          yield { index: i, ptsMs: i * 100, width: 64, height: 48, rgb: Buffer.alloc(64 * 48 * 3, i) };
        }
      },
      async close() {},
    };
    return source;
  };
}

interface Trickle {
  /** Sends more bytes. */
  send(b: Buffer): void;
  /** The answer, when the server gives one before the upload ends. */
  answer: Promise<{ status: number; body: any }>;
  destroy(): void;
}

/** A chunked upload that sends `first` and then only what the test sends: it never ends by itself. */
function trickle(url: string, client: string, first: Buffer): Trickle {
  const req = http.request(`${url}/predict/video`, { method: 'POST', headers: { 'content-type': 'video/mp4', 'transfer-encoding': 'chunked', 'x-forwarded-for': client } });
  req.on('error', () => {}); // the server closes the connection after a 408 or 503
  const answer = new Promise<{ status: number; body: any }>((resolve, reject) => {
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) }));
      res.on('error', reject);
    });
  });
  answer.catch(() => {});
  req.write(first);
  return { send: (b) => req.write(b), answer, destroy: () => req.destroy() };
}

const VIDEO = u8(Buffer.from('a complete upload: the scripted source ignores its bytes'));

test('two uploads trickling in and never ending hold no video slot: a real video from another client is served beside them', { timeout: 30_000 }, async () => {
  const clock = new HandClock(); // stands still: the trickles are never too slow here
  const s = await start({ openVideo: scripted(5), trustProxy: true, videoClock: clock });
  const trickles: Trickle[] = [];
  try {
    assert.equal(s.srv.videoUploads.limits.maxUploads, 8);
    trickles.push(trickle(s.url, '198.51.100.7', Buffer.alloc(64 * 1024, 1)), trickle(s.url, '198.51.100.7', Buffer.alloc(64 * 1024, 2)));
    await waitFor(() => s.srv.videoUploads.arriving === 2 && s.srv.videoUploads.diskBytes === 2 * 64 * 1024, 'both trickles arriving, their first 64 KiB on disk');
    // The default --video-max-concurrent is 2: both slots would be taken if an upload held one.
    const real = await postVideo(s.url, '', VIDEO, { 'content-type': 'video/mp4', 'x-forwarded-for': '203.0.113.9' });
    const text = await real.text();
    assert.equal(real.status, 200, text);
    const out = ndjsonLines(text);
    assert.equal(out.at(-1).summary.frames, 5);
    // A third upload from the trickling client is over its cap; the two are still arriving.
    const third = trickle(s.url, '198.51.100.7', Buffer.alloc(10));
    const refused = await third.answer;
    assert.equal(refused.status, 503);
    assert.equal(refused.body.code, 'E_QUEUE_FULL');
    assert.match(refused.body.detail, /you already have 2 video uploads arriving and one client may have 2 \(--video-client-uploads\)/);
    third.destroy();
    assert.equal(s.srv.videoUploads.arriving, 2, 'the two trickles still arrive');
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    assert.match(metrics, /^rfdetr_video_uploads_arriving 2$/m);
    assert.match(metrics, /^rfdetr_video_upload_disk_bytes 131072$/m);
    assert.match(metrics, /^rfdetr_video_uploads_refused_total\{reason="places"\} 1$/m);
  } finally {
    for (const t of trickles) t.destroy();
    await waitFor(() => s.srv.videoUploads.arriving === 0, 'the trickles gone');
    assert.equal(s.srv.videoUploads.diskBytes, 0, 'their bytes given back');
    await s.stop();
  }
});

test('an upload below the minimum rate after its grace is dropped with 408; one that keeps up is not, until the upload timeout', { timeout: 30_000 }, async () => {
  const clock = new HandClock();
  const s = await start({
    openVideo: scripted(1), trustProxy: true, videoClock: clock,
    videoLimits: { minUploadRate: 1000, uploadGraceMs: 10_000, bodyTimeoutMs: 18_000 },
  });
  try {
    const slow = trickle(s.url, '198.51.100.1', Buffer.alloc(5000));
    const steady = trickle(s.url, '198.51.100.2', Buffer.alloc(5000));
    await waitFor(() => s.srv.videoUploads.diskBytes === 10_000, 'both uploads\' first 5000 bytes');
    // 5000 bytes at 1000 B/s buy 5 s beyond the 10 s grace.
    clock.moveTo(15_000);
    assert.equal(s.srv.videoUploads.arriving, 2, 'at 15 s both are within 10 s + 5000 B / (1000 B/s)');
    steady.send(Buffer.alloc(5000));
    await waitFor(() => s.srv.videoUploads.diskBytes === 15_000, 'the steady upload\'s next 5000 bytes');
    clock.moveTo(16_000);
    const dropped = await slow.answer;
    assert.equal(dropped.status, 408);
    assert.equal(dropped.body.code, 'E_BODY_TIMEOUT');
    assert.match(dropped.body.detail, /arriving at 313 bytes\/s \(5000 bytes in 16 s\); an upload must average at least 1000 bytes\/s after its first 10 s \(--video-min-upload-rate\)/);
    assert.equal(s.srv.videoUploads.arriving, 1, 'the steady one still arrives');
    // 10000 bytes buy it 20 s, but the whole upload has 18 s.
    clock.moveTo(18_000);
    assert.equal(s.srv.videoUploads.arriving, 1);
    clock.moveTo(19_000);
    const late = await steady.answer;
    assert.equal(late.status, 408);
    assert.match(late.body.detail, /did not arrive completely within 18000 ms \(10000 bytes received\)/);
    await waitFor(() => s.srv.videoUploads.arriving === 0 && s.srv.videoUploads.diskBytes === 0, 'both uploads removed');
    assert.equal(s.backend.calls, 0);
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    assert.match(metrics, /^rfdetr_video_uploads_refused_total\{reason="too_slow"\} 1$/m);
    assert.match(metrics, /^rfdetr_video_uploads_refused_total\{reason="timeout"\} 1$/m);
  } finally {
    await s.stop();
  }
});

test('the bytes of uploads on disk are held to --video-disk-limit (half of it per client), as they arrive and while their video runs', { timeout: 30_000 }, async () => {
  const clock = new HandClock();
  const s = await start({ openVideo: scripted(2), trustProxy: true, videoClock: clock, videoLimits: { maxBytes: 1000, diskLimit: 2000 } });
  const trickles: Trickle[] = [];
  try {
    const a1 = trickle(s.url, '198.51.100.1', Buffer.alloc(800));
    trickles.push(a1);
    await waitFor(() => s.srv.videoUploads.diskBytes === 800, 'a\'s first upload on disk');
    const a2 = trickle(s.url, '198.51.100.1', Buffer.alloc(300));
    const overShare = await a2.answer;
    assert.equal(overShare.status, 503);
    assert.match(overShare.body.detail, /video uploads on the server's disk fill one client's share \(1000 bytes, half of --video-disk-limit\)/);
    a2.destroy();
    await waitFor(() => s.srv.videoUploads.diskBytes === 800, 'the refused upload\'s bytes given back');
    const b = trickle(s.url, '198.51.100.2', Buffer.alloc(900));
    trickles.push(b);
    await waitFor(() => s.srv.videoUploads.diskBytes === 1700, 'b\'s upload on disk');
    const c = trickle(s.url, '198.51.100.3', Buffer.alloc(400));
    const overAll = await c.answer;
    assert.equal(overAll.status, 503);
    assert.match(overAll.body.detail, /video uploads on the server's disk fill --video-disk-limit \(2000 bytes\)/);
    c.destroy();
    for (const t of trickles) t.destroy();
    await waitFor(() => s.srv.videoUploads.arriving === 0 && s.srv.videoUploads.diskBytes === 0, 'every upload removed');
    // A complete upload is served and its bytes given back with its file.
    const ok = await postVideo(s.url, '', u8(Buffer.alloc(900)), { 'content-type': 'video/mp4', 'x-forwarded-for': '198.51.100.4' });
    assert.equal(ok.status, 200);
    assert.equal(ndjsonLines(await ok.text()).at(-1).summary.frames, 2);
    assert.equal(s.srv.videoUploads.diskBytes, 0);
    assert.match(await (await fetch(`${s.url}/metrics`)).text(), /^rfdetr_video_uploads_refused_total\{reason="disk"\} 2$/m);
  } finally {
    for (const t of trickles) t.destroy();
    await s.stop();
  }
});
