// Hostile and malformed clients: each test is one way a client can misbehave. The server must stay
// up, answer real requests, keep its budgets and close what it stops reading.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import sharp from 'sharp';
import { decodeImage, type DecodeOptions } from '../../src/image/decode.ts';
import { goldens, postJson, rawExchange, start, waitFor, type Started } from './helpers.ts';

const b64 = (i: number) => goldens()[i]!.png.toString('base64');

function statusOf(httpText: string): number {
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(httpText)?.[1] ?? 0);
}

async function stillServes(s: Started): Promise<void> {
  const r = await postJson(s.url, { image: b64(0) });
  assert.equal(r.status, 200, `a real request after the hostile one: ${r.text}`);
}

describe('malformed bodies end the request, never the process', () => {
  test('a multipart file part that never reaches its closing boundary → 422, and the server keeps serving', async () => {
    const s = await start();
    try {
      const body = Buffer.from('--XX\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\n\r\nAAAA');
      const head = `POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=XX\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
      const reply = await rawExchange(s.url, Buffer.concat([Buffer.from(head), body]));
      assert.equal(statusOf(reply), 422, reply);
      assert.match(reply, /E_SCHEMA/);
      assert.match(reply, /closing boundary|Unexpected end/);
      await stillServes(s);
    } finally {
      await s.stop();
    }
  });

  for (const [enc, make] of [['gzip', zlib.gzipSync], ['deflate', zlib.deflateSync], ['br', zlib.brotliCompressSync]] as const) {
    test(`a corrupt ${enc} body → 400 E_BODY_ENCODING (the client's error, not a 500)`, async () => {
      const s = await start();
      try {
        const good = make(Buffer.from(JSON.stringify({ image: b64(0) })));
        const corrupt = Buffer.concat([good.subarray(0, 20), Buffer.alloc(64, 0xa5), good.subarray(84)]);
        const res = await fetch(`${s.url}/predict`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': enc }, body: new Uint8Array(corrupt) });
        const b: any = await res.json();
        assert.equal(res.status, 400, JSON.stringify(b));
        assert.equal(b.code, 'E_BODY_ENCODING');
        assert.match(b.detail, /could not be decompressed/);
        // A correctly compressed body still works.
        const ok = await fetch(`${s.url}/predict`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': enc }, body: new Uint8Array(good) });
        assert.equal(ok.status, 200);
      } finally {
        await s.stop();
      }
    });
  }

  test('an upper-case DATA: prefix is accepted; a raw body over the limit says bytes, not "after base64 decoding"', async () => {
    const s = await start();
    try {
      const r = await postJson(s.url, { image: `DATA:IMAGE/PNG;BASE64,${b64(0)}` });
      assert.equal(r.status, 200, r.text);
      const big = new Uint8Array(32 * 1024 * 1024 + 10);
      const res = await fetch(`${s.url}/predict`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: big });
      const b: any = await res.json();
      assert.equal(b.code, 'E_IMAGE_TOO_LARGE');
      assert.doesNotMatch(b.detail, /base64/);
    } finally {
      await s.stop();
    }
  });

  test('rfdetr_predict_rejected_total counts /predict errors by code', async () => {
    const s = await start();
    try {
      await postJson(s.url, { image: 'not base64 !!' });
      await postJson(s.url, { threshold: 0.5 });
      const m = await (await fetch(`${s.url}/metrics`)).text();
      assert.match(m, /^rfdetr_predict_rejected_total\{code="E_IMAGE_UNDECODABLE"\} 1$/m);
      assert.match(m, /^rfdetr_predict_rejected_total\{code="E_SCHEMA"\} 1$/m);
    } finally {
      await s.stop();
    }
  });
});

describe('nobody locks the server up', () => {
  test('24 stalled chunked uploads (more than --queue-size) do not keep real requests out; each gets 408 and is closed', async () => {
    const s = await start({ queueSize: 4, bodyTimeoutMs: 600 });
    try {
      const head = 'POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"ima\r\n';
      const stalled = Array.from({ length: 24 }, () => rawExchange(s.url, Buffer.from(head)));
      await waitFor(() => s.srv.admission.bodiesInFlight === 24, '24 bodies being received');
      // Real requests are answered while the stalled bodies hold their slots.
      const real = await Promise.all([postJson(s.url, { image: b64(0) }), postJson(s.url, { image: b64(1) })]);
      assert.deepEqual(real.map((r) => r.status), [200, 200]);
      const replies = await Promise.all(stalled);
      for (const r of replies) {
        assert.equal(statusOf(r), 408, r.slice(0, 200));
        assert.match(r, /E_BODY_TIMEOUT/);
      }
      assert.equal(s.srv.admission.bodiesInFlight, 0);
      await stillServes(s);
    } finally {
      await s.stop();
    }
  });

  test('a client whose queue share is full is refused 503 before its body is read (headers alone get the answer)', async () => {
    // Share 2 of --queue-size 4; the engine holds one forward, two more images wait: every request of this
    // client would be refused once its body was in, so the body is not read (bench/redteam: reading refused
    // batches and 40 MB bodies was most of the server's thread under attack).
    const s = await start({ queueSize: 4, bodyTimeoutMs: 2000 });
    const release = s.backend.block();
    try {
      const first = postJson(s.url, { image: b64(0) });
      await waitFor(() => s.backend.calls === 1, 'the first forward to start');
      const queued = [postJson(s.url, { image: b64(0) }), postJson(s.url, { image: b64(1) })];
      await waitFor(() => s.srv.admission.queued === 2, 'two images queued');
      const head = 'POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n';
      const reply = await rawExchange(s.url, Buffer.from(head));
      assert.equal(statusOf(reply), 503, reply.slice(0, 300));
      assert.match(reply, /you already have 2 images queued and one client may have 2/);
      assert.match(reply, /Connection: close/i);
      release();
      assert.deepEqual([(await first).status, ...(await Promise.all(queued)).map((r) => r.status)], [200, 200, 200]);
      assert.equal(s.srv.admission.bodiesInFlight, 0);
      await stillServes(s);
    } finally {
      release();
      await s.stop();
    }
  });

  test('a body whose declared length cannot fit in the client\'s memory share is refused 503 before it is read', async () => {
    // 512 MiB limit: one client may hold 128 MiB of undecoded bytes; a 45 MB JSON body counts 3 bytes per byte.
    const s = await start({ memoryLimit: 512 * 1024 * 1024, bodyTimeoutMs: 2000 });
    try {
      const head = 'POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 45000000\r\n\r\n{"image":"';
      const reply = await rawExchange(s.url, Buffer.from(head));
      assert.equal(statusOf(reply), 503, reply.slice(0, 300));
      assert.match(reply, /request bodies and downloads not yet decoded fill one client's share \(128 MiB\)/);
      assert.equal(s.srv.admission.memory.undecoded, 0, 'nothing stays reserved');
      assert.equal(s.srv.admission.bodiesInFlight, 0);
      // A declared length that fits is reserved whole and given back once the image is decoded.
      await stillServes(s);
      assert.equal(s.srv.admission.memory.undecoded, 0);
    } finally {
      await s.stop();
    }
  });

  test('decoded pixels stay within the memory budget: tiny PNGs declaring 8192×8192 decode one at a time under a 512 MiB limit (256 MiB per image)', async () => {
    const bomb = await sharp({ create: { width: 8192, height: 8192, channels: 3, background: { r: 0, g: 0, b: 0 } } }).png({ compressionLevel: 9 }).toBuffer();
    assert.ok(bomb.length < 1024 * 1024, `a ${bomb.length}-byte PNG`);
    let peak = 0;
    let s!: Started;
    const decode = async (b: Uint8Array, o: DecodeOptions) => {
      const img = await decodeImage(b, o);
      peak = Math.max(peak, s.srv.admission.memory.work.running);
      return img;
    };
    s = await start({ decode, memoryLimit: 512 * 1024 * 1024, prepConcurrency: 4 });
    try {
      const rs = await Promise.all(Array.from({ length: 6 }, () => postJson(s.url, { image: bomb.toString('base64') })));
      assert.deepEqual(rs.map((r) => r.status), Array(6).fill(200));
      assert.equal(peak, 8192 * 8192 * 3, 'never more than one 201 MB image decoded at once');
      assert.equal(s.srv.admission.memory.work.running, 0, 'every reservation was released');
    } finally {
      await s.stop();
    }
  });
});
