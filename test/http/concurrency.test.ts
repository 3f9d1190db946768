// Concurrency and lifecycle over real HTTP with a scripted backend: parallel correctness, the bounded queue,
// the deadline, a client leaving while queued, liveness during a forward, and drain.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { decodeImage, type DecodeOptions } from '../../src/image/decode.ts';
import { goldenResponder, goldens, postJson, start, u8, waitFor } from './helpers.ts';
import { holdThreadPool, threadPoolSize } from '../helpers/thread-pool.ts';

const b64 = (i: number) => goldens()[i]!.png.toString('base64');

describe('concurrency', () => {
  test('16 parallel requests over the three fixture images: every response is its own image\'s detections', async () => {
    const s = await start({ queueSize: 32 });
    s.backend.respond = goldenResponder;
    const release = s.backend.block();
    try {
      const order = Array.from({ length: 16 }, (_, i) => i % 3);
      const pending = order.map((c) => postJson(s.url, { image: b64(c), max_detections: 300 }, { 'x-request-id': `par-${c}` }));
      // The first forward is held until the other 15 are decoded and waiting behind it.
      await waitFor(() => s.backend.calls === 1 && s.srv.engine.depth === 15, 'one forward and 15 requests waiting for the engine');
      release();
      const rs = await Promise.all(pending);
      for (let i = 0; i < rs.length; i++) {
        const r = rs[i]!;
        const g = goldens()[order[i]!]!;
        assert.equal(r.status, 200, r.text);
        assert.deepEqual(r.json.image_size, { width: g.width, height: g.height });
        assert.deepEqual(r.json.detections.map((d: any) => [d.label_id, d.score, d.box]), g.detections['0.5']!.map((d) => [d.label, d.score, d.box_xyxy]));
      }
      assert.equal(s.backend.calls, 16);
      assert.equal(s.backend.maxInFlight, 1, 'forwards never overlapped (engine concurrency 1)');
    } finally {
      s.backend.release();
      await s.stop();
    }
  });

  test('queue full → 503 E_QUEUE_FULL with Retry-After; the admitted requests all finish', async () => {
    const s = await start({ queueSize: 2, trustProxy: true });
    const release = s.backend.block();
    try {
      const first = postJson(s.url, { image: b64(0) }, { 'x-forwarded-for': 'a' });
      await waitFor(() => s.backend.calls === 1, 'the first forward');
      const queued = [postJson(s.url, { image: b64(0) }, { 'x-forwarded-for': 'b' }), postJson(s.url, { image: b64(0) }, { 'x-forwarded-for': 'c' })];
      await waitFor(() => s.srv.engine.depth === 2, 'two requests waiting for the engine');
      const full = await postJson(s.url, { image: b64(0) }, { 'x-forwarded-for': 'd' });
      assert.equal(full.status, 503);
      assert.equal(full.json.code, 'E_QUEUE_FULL');
      assert.match(full.json.detail, /queue cannot take this request's 1 image \(2 of 2 places taken/);
      assert.ok(Number(full.headers.get('retry-after')) >= 1);
      release();
      const done = await Promise.all([first, ...queued]);
      assert.deepEqual(done.map((r) => r.status), [200, 200, 200]);
      assert.equal(s.backend.calls, 3);
    } finally {
      s.backend.release();
      await s.stop();
    }
  });

  test('deadline → 504 E_DEADLINE, in the engine and while queued; a request that expires queued costs no forward', async () => {
    const s = await start({ deadlineMs: 400 });
    const release = s.backend.block();
    try {
      const a = postJson(s.url, { image: b64(0) });
      await waitFor(() => s.backend.calls === 1, 'the first forward');
      const b = postJson(s.url, { image: b64(0) });
      // Both answers arrive while the forward is still held: they came from the deadline, not its end.
      const [ra, rb] = await Promise.all([a, b]);
      assert.equal(s.backend.completed, 0, 'the forward was still held when both answers came');
      for (const r of [ra, rb]) {
        assert.equal(r.status, 504, r.text);
        assert.equal(r.json.code, 'E_DEADLINE');
        assert.match(r.json.detail, /did not finish within its 400 ms deadline/);
      }
      assert.match(ra.json.detail, /in the engine/);
      assert.match(rb.json.detail, /waiting for the engine/);
      release();
      await waitFor(() => s.srv.engine.inFlight === 0, 'the blocked forward to finish');
      // The queue is first in, first out: a request sent now reaches the engine after the expired one would have.
      assert.equal((await postJson(s.url, { image: b64(0) })).status, 200, 'the engine is free again');
      assert.equal(s.backend.calls, 2, 'the expired queued request never reached the engine');
    } finally {
      s.backend.release();
      await s.stop();
    }
  });

  test('a deadline that passes during decode → 504 naming the stage, and no forward', async () => {
    // The first decode is held until its request has had its 504; the decodes after it run at once.
    let openDecode!: () => void;
    const held = new Promise<void>((r) => (openDecode = r));
    let decodes = 0;
    let firstDecoded!: () => void;
    const firstDone = new Promise<void>((r) => (firstDecoded = r));
    const slow = async (b: Uint8Array, o: DecodeOptions) => {
      if (decodes++ > 0) return decodeImage(b, o);
      await held;
      try {
        return await decodeImage(b, o);
      } finally {
        firstDecoded();
      }
    };
    const s = await start({ decode: slow, deadlineMs: 150 });
    try {
      const r = await postJson(s.url, { image: b64(0) });
      assert.equal(r.status, 504);
      assert.match(r.json.detail, /150 ms deadline \(it was being received, decoded or waiting for a decode slot\)/);
      openDecode();
      await firstDone;
      // A request sent after the late decode finished is forwarded after anything that decode could have queued.
      assert.equal((await postJson(s.url, { image: b64(0) })).status, 200);
      assert.equal(s.backend.calls, 1, 'the request whose deadline passed in decode was never forwarded');
    } finally {
      openDecode();
      await s.stop();
    }
  });

  test('a client that disconnects while queued costs no forward', async () => {
    const s = await start();
    const release = s.backend.block();
    try {
      const a = postJson(s.url, { image: b64(0) });
      await waitFor(() => s.backend.calls === 1, 'the first forward');
      const ac = new AbortController();
      const b = postJson(s.url, { image: b64(0) }, {}, ac.signal).catch((e: Error) => e);
      await waitFor(() => s.srv.engine.depth === 1, 'the second request to wait for the engine');
      ac.abort();
      await waitFor(() => s.srv.engine.depth === 0, 'the aborted request to leave the queue');
      assert.ok((await b) instanceof Error);
      release();
      assert.equal((await a).status, 200);
      // First in, first out: a request sent now reaches the engine after the aborted one would have.
      assert.equal((await postJson(s.url, { image: b64(0) })).status, 200);
      assert.equal(s.backend.calls, 2, 'the aborted request was never forwarded');
      await waitFor(() => s.logs.some((l) => l.event === 'request' && l.status === 499), 'a 499 log line');
    } finally {
      s.backend.release();
      await s.stop();
    }
  });

  test('/tt-liveness, /health and /metrics answer while a forward is blocked', { timeout: 30_000 }, async () => {
    const s = await start();
    const release = s.backend.block();
    try {
      const a = postJson(s.url, { image: b64(0) });
      await waitFor(() => s.backend.calls === 1, 'the forward');
      const live = await fetch(`${s.url}/tt-liveness`);
      const body: any = await live.json();
      assert.equal(live.status, 200);
      assert.equal(body.status, 'alive');
      assert.equal(body.model_ready, true);
      assert.equal(body.in_flight, 1);
      assert.equal((await fetch(`${s.url}/health`)).status, 200);
      const m = await (await fetch(`${s.url}/metrics`)).text();
      assert.match(m, /^rfdetr_engine_forwards_in_flight 1$/m);
      assert.match(m, /^rfdetr_predict_in_flight 1$/m);
      assert.equal(s.backend.completed, 0, 'every probe was answered while the forward was held');
      release();
      assert.equal((await a).status, 200);
    } finally {
      s.backend.release();
      await s.stop();
    }
  });

  test('decoding of queued requests overlaps the forward in progress', async () => {
    const s = await start({ prepConcurrency: 2, engineConcurrency: 1 });
    const release = s.backend.block();
    try {
      const a = postJson(s.url, { image: b64(2) });
      await waitFor(() => s.backend.calls === 1, 'the first forward');
      const rest = [postJson(s.url, { image: b64(2) }), postJson(s.url, { image: b64(2) })];
      // Both reach the engine queue, decoded, while the first forward is still blocked.
      await waitFor(() => s.srv.engine.depth === 2, 'two decoded requests waiting');
      assert.equal(s.backend.calls, 1);
      release();
      const all = await Promise.all([a, ...rest]);
      assert.deepEqual(all.map((r) => r.status), [200, 200, 200]);
    } finally {
      s.backend.release();
      await s.stop();
    }
  });
});

describe('decoding stays off the event loop', () => {
  test('probes are answered while an 8192×6144 image is being decoded', async () => {
    // Built before the pool is held: sharp's encode runs there too.
    const big = await sharp(goldens()[2]!.png).resize(8192, 6144, { kernel: 'nearest' }).jpeg({ quality: 80 }).toBuffer();
    // The server's own decode (decodeImage, sharp), wrapped only to see it start and end.
    let started!: () => void;
    const decodeStarted = new Promise<void>((r) => (started = r));
    let decodeDone = false;
    const decode = (b: Uint8Array, o: DecodeOptions) => {
      started();
      return decodeImage(b, o).finally(() => (decodeDone = true));
    };
    const s = await start({ decode });
    // Every libuv thread is parked, so the decode stays in progress until the release below, however fast the
    // machine. A decode run on the event loop instead would finish before the test's next turn, and no probe
    // could be sent, let alone answered, while it is in progress.
    const pool = holdThreadPool();
    try {
      // A raw image/jpeg body: the test is about the decode, not the JSON parse of a 3 MB base64 string.
      const p = fetch(`${s.url}/predict`, { method: 'POST', headers: { 'content-type': 'image/jpeg' }, body: u8(big) });
      await decodeStarted;
      for (let i = 0; i < 3; i++) {
        const r = await fetch(`${s.url}/tt-liveness`);
        assert.equal(r.status, 200);
        assert.equal(((await r.json()) as { status: string }).status, 'alive');
      }
      assert.ok(pool.held(), `the thread pool was not held (UV_THREADPOOL_SIZE=${process.env.UV_THREADPOOL_SIZE ?? 'unset'}, ${threadPoolSize()} threads parked): this test cannot hold the decode`);
      assert.equal(decodeDone, false, 'three probes were answered after the decode started and before it ended');
      assert.equal(s.backend.calls, 0);
      await pool.release();
      const res = await p;
      const text = await res.text();
      assert.equal(res.status, 200, text);
      assert.equal(decodeDone, true);
      assert.ok((JSON.parse(text) as { timing_ms: { decode: number } }).timing_ms.decode > 0);
    } finally {
      await pool.release();
      await s.stop();
    }
  });
});

describe('drain (what SIGTERM calls)', () => {
  test('readiness 503, new requests 503 on the same listener, in-flight requests finish, then the backend is closed and the port closes', async () => {
    const s = await start();
    // A second listener on the same app stands for a connection the load balancer still holds.
    const side = http.createServer(s.srv.app).listen(0, '127.0.0.1');
    await new Promise((r) => side.once('listening', r));
    const sideUrl = `http://127.0.0.1:${(side.address() as AddressInfo).port}`;
    const release = s.backend.block();
    try {
      assert.equal((await fetch(`${sideUrl}/ready`)).status, 200);
      const a = postJson(s.url, { image: b64(0) });
      await waitFor(() => s.backend.calls === 1, 'the in-flight forward');
      const drained = s.srv.drain(5000);
      assert.equal(s.srv.draining, true);
      const r = await fetch(`${sideUrl}/ready`);
      assert.equal(r.status, 503);
      assert.equal(((await r.json()) as any).code, 'E_DRAINING');
      assert.equal((await fetch(`${sideUrl}/v1/health`)).status, 503);
      const live: any = await (await fetch(`${sideUrl}/tt-liveness`)).json();
      assert.equal(live.draining, true);
      assert.equal(live.model_ready, false);
      const late = await postJson(sideUrl, { image: b64(0) });
      assert.equal(late.status, 503);
      assert.equal(late.json.code, 'E_DRAINING');
      // The listener stays open while draining: a new connection gets the documented 503, not "refused".
      const fresh = await postJson(s.url, { image: b64(0) }, { connection: 'close' });
      assert.equal(fresh.status, 503);
      assert.equal(fresh.json.code, 'E_DRAINING');
      assert.equal((await fetch(`${s.url}/ready`)).status, 503);
      assert.equal(s.backend.closed, 0, 'the backend stays open while a request is in flight');
      release();
      const ra = await a;
      assert.equal(ra.status, 200, 'the in-flight request completes');
      await drained;
      assert.equal(s.backend.closed, 1);
      assert.equal(s.backend.destroyed, undefined);
      assert.ok(s.logs.some((l) => l.event === 'drained' && l.timed_out === false));
      await assert.rejects(fetch(`${s.url}/health`, { headers: { connection: 'close' } }), 'after the drain the port is closed');
    } finally {
      s.backend.release();
      side.close();
    }
  });

  test('past the drain deadline the remaining requests get 503 and the backend is destroyed', { timeout: 30_000 }, async () => {
    const s = await start();
    s.backend.block();
    try {
      const a = postJson(s.url, { image: b64(0) });
      await waitFor(() => s.backend.calls === 1, 'the in-flight forward');
      await s.srv.drain(150);
      assert.equal(s.backend.completed, 0, 'the drain ended at its deadline, with the forward still held');
      const r = await a;
      assert.equal(r.status, 503);
      assert.equal(r.json.code, 'E_DRAINING');
      assert.match(r.json.detail, /150 ms drain deadline passed/);
      assert.ok(s.backend.destroyed, 'backend destroyed');
      assert.equal(s.backend.closed, 0);
    } finally {
      s.backend.release();
    }
  });
});
