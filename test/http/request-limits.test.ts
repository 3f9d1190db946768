// What a request may cost the server: return_image on an image too large to annotate within --memory-limit is
// refused before a pixel is decoded (singly and per image of a batch); Content-Encoding as RFC 9110 names it
// (x-gzip, raw deflate) with the inflated size capped; one spelling per route; pipelined requests per
// connection bounded; a response nobody reads dropped.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import zlib from 'node:zlib';
import sharp from 'sharp';
import { decodeImage, type DecodeOptions } from '../../src/image/decode.ts';
import { goldens, postJson, rawExchange, start, waitFor } from './helpers.ts';

const b64 = (i: number) => goldens()[i]!.png.toString('base64');

describe('return_image within the memory budget', () => {
  test('an 8192×8192 image with return_image is refused (400) before it is decoded; without it, it runs', async () => {
    const big = await sharp({ create: { width: 8192, height: 8192, channels: 3, background: { r: 9, g: 9, b: 9 } } }).jpeg().toBuffer();
    let pixelsDecoded = 0;
    const decode = async (b: Uint8Array, o: DecodeOptions) => {
      const img = await decodeImage(b, o);
      pixelsDecoded += img.width * img.height;
      return img;
    };
    const s = await start({ decode });
    try {
      const one = await postJson(s.url, { image: big.toString('base64'), return_image: 'png' });
      assert.equal(one.status, 400, one.text.slice(0, 300));
      assert.equal(one.json.code, 'E_IMAGE_TOO_LARGE');
      assert.match(one.json.detail, /return_image on a 8192x8192 image needs about \d+ MiB to decode, draw and encode; this server allows 512 MiB per image \(half of --memory-limit 1024 MiB\): ask without return_image/);
      const five = await postJson(s.url, { images: Array(5).fill(big.toString('base64')), return_image: 'jpeg' });
      assert.equal(five.status, 200);
      assert.deepEqual(five.json.results.map((r: any) => [r.status, r.code]), Array(5).fill([400, 'E_IMAGE_TOO_LARGE']));
      assert.equal(pixelsDecoded, 0, 'nothing was decoded');
      assert.equal(s.backend.calls, 0);
      const plain = await postJson(s.url, { image: big.toString('base64') });
      assert.equal(plain.status, 200);
      assert.equal(pixelsDecoded, 8192 * 8192);
      await waitFor(() => s.srv.admission.memory.held === 0, 'the memory budget is empty again');
    } finally {
      await s.stop();
    }
  });

  test('an annotated image is held in the budget until its response is written, then released', async () => {
    const s = await start();
    try {
      const r = await postJson(s.url, { image: b64(0), return_image: 'png' });
      assert.equal(r.status, 200);
      assert.ok(r.json.annotated_image.base64.length > 100);
      await waitFor(() => s.srv.admission.memory.held === 0 && s.srv.admission.queued === 0, 'everything given back');
    } finally {
      await s.stop();
    }
  });
});

describe('Content-Encoding', () => {
  const body = () => Buffer.from(JSON.stringify({ image: b64(0) }));
  for (const [name, enc, make] of [
    ['x-gzip (RFC 9110: gzip)', 'x-gzip', zlib.gzipSync],
    ['deflate in the zlib format', 'deflate', zlib.deflateSync],
    ['raw deflate without the zlib header', 'deflate', zlib.deflateRawSync],
    ['GZIP in capitals', 'GZIP', zlib.gzipSync],
  ] as const) {
    test(`${name} → 200`, async () => {
      const s = await start();
      try {
        const res = await fetch(`${s.url}/predict`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': enc }, body: new Uint8Array(make(body())) });
        assert.equal(res.status, 200, await res.text());
      } finally {
        await s.stop();
      }
    });
  }

  test('a compressed raw image body; an unknown encoding → 415; a body that inflates past the cap → 413, counted as it inflates', async () => {
    const s = await start();
    try {
      const raw = await fetch(`${s.url}/predict?threshold=0.5`, { method: 'POST', headers: { 'content-type': 'image/png', 'content-encoding': 'x-gzip' }, body: new Uint8Array(zlib.gzipSync(goldens()[0]!.png)) });
      assert.equal(raw.status, 200, await raw.text());
      const odd = await fetch(`${s.url}/predict`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': 'compress' }, body: 'x' });
      assert.equal(odd.status, 415);
      assert.match(((await odd.json()) as any).detail, /Expected Content-Encoding gzip, x-gzip, deflate, br or identity but received "compress"/);
      // 100 MB of spaces compress to ~100 kB: refused once the inflated JSON passes the body cap.
      const bomb = zlib.gzipSync(Buffer.alloc(100 * 1024 * 1024, 0x20));
      const r = await fetch(`${s.url}/predict`, { method: 'POST', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: new Uint8Array(bomb) });
      assert.equal(r.status, 413);
      assert.equal(((await r.json()) as any).code, 'E_BODY_TOO_LARGE');
      assert.equal(s.srv.admission.memory.undecoded, 0);
    } finally {
      await s.stop();
    }
  });
});

describe('routes and connections', () => {
  test('/predict/ and /PREDICT do not route (404); /predict does', async () => {
    const s = await start();
    try {
      for (const p of ['/predict/', '/PREDICT', '/Predict', '/health/']) {
        const r = await fetch(`${s.url}${p}`, { method: p.startsWith('/health') ? 'GET' : 'POST', headers: { 'content-type': 'application/json' }, body: p.startsWith('/health') ? undefined : JSON.stringify({ image: b64(0) }) });
        assert.equal(r.status, 404, p);
      }
      assert.equal(s.backend.calls, 0);
      assert.equal((await postJson(s.url, { image: b64(0) })).status, 200);
    } finally {
      await s.stop();
    }
  });

  test('five pipelined requests on one connection: two are served, the rest get 503 and the connection closes', async () => {
    const s = await start({ maxRequestsPerConnection: 2 });
    try {
      const json = JSON.stringify({ image: b64(0) });
      const one = `POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`;
      const reply = await rawExchange(s.url, Buffer.from(one.repeat(5)));
      const statuses = [...reply.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
      assert.deepEqual(statuses.slice(0, 3), [200, 200, 503], reply.slice(0, 300));
      assert.match(reply, /more than 2 requests in flight on one connection/);
      assert.ok(s.backend.calls <= 2, `${s.backend.calls} forwards`);
    } finally {
      await s.stop();
    }
  });

  test('a client that never reads its response is dropped after the send timeout, and the response\'s memory is given back', async () => {
    // A 3000×3000 noise image: its annotated PNG (27 MB, 36 MB in base64) is more than the socket buffers take
    // without a reader (1500×1500 was not).
    const noise = await sharp(randomBytes(3000 * 3000 * 3), { raw: { width: 3000, height: 3000, channels: 3 } }).png({ compressionLevel: 1 }).toBuffer();
    const s = await start({ sendTimeoutMs: 300 });
    try {
      const { hostname, port } = new URL(s.url);
      const sock = net.connect(Number(port), hostname);
      sock.pause();
      const closed = new Promise<void>((r) => sock.on('close', () => r()));
      sock.on('error', () => {});
      const json = JSON.stringify({ image: noise.toString('base64'), return_image: 'png' });
      sock.write(`POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`);
      await waitFor(() => s.backend.calls === 1, 'the forward', 20_000);
      await waitFor(() => s.srv.admission.memory.held === 0 && s.srv.admission.queued === 0, 'the response dropped and its memory given back', 20_000);
      sock.resume();
      await closed;
    } finally {
      await s.stop();
    }
  });
});
