// image_url: off by default; with --allow-url-host only the named hosts, same-host redirects only, no
// non-public address unless named as an address, a size cap and a time limit. The image server is a local
// HTTP server on loopback, allowed explicitly as 127.0.0.1.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import dns from 'node:dns/promises';
import http from 'node:http';
import os from 'node:os';
import type { AddressInfo } from 'node:net';
import { createUrlFetcher, isPublicAddress } from '../../src/image/fetch-url.ts';
import { goldens, postJson, start, type Started } from './helpers.ts';
import { skipOrFail } from '../helpers/skip.ts';

let images: http.Server;
let base: string;
let port: number;
const stalls = new Set<http.ServerResponse>();

before(async () => {
  images = http.createServer((req, res) => {
    const png = goldens()[0]!.png;
    if (req.url === '/cat.png') return res.writeHead(200, { 'content-type': 'image/png' }).end(png);
    if (req.url === '/moved') return res.writeHead(302, { location: '/cat.png' }).end();
    if (req.url === '/elsewhere') return res.writeHead(302, { location: `http://localhost:${port}/cat.png` }).end();
    if (req.url === '/loop') return res.writeHead(302, { location: '/loop' }).end();
    if (req.url === '/big') return res.writeHead(200, { 'content-length': '5000' }).end(Buffer.alloc(5000));
    if (req.url === '/big-chunked') {
      res.writeHead(200);
      res.write(Buffer.alloc(3000));
      return res.end(Buffer.alloc(3000));
    }
    if (req.url === '/stall') {
      stalls.add(res);
      res.writeHead(200);
      return res.write(Buffer.alloc(10));
    }
    res.writeHead(404).end('no');
  });
  await new Promise<void>((r) => images.listen(0, '127.0.0.1', r));
  port = (images.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}`;
});
after(async () => {
  for (const r of stalls) r.destroy();
  images.closeAllConnections();
  await new Promise((r) => images.close(r));
});

describe('through /predict', () => {
  let s: Started;
  before(async () => {
    s = await start({ allowUrlHosts: [`127.0.0.1:${port}`] });
  });
  after(() => s.stop());

  test('an allowed host: the image is fetched and answered as if it had been sent', async () => {
    const byUrl = await postJson(s.url, { image_url: `${base}/cat.png`, max_detections: 7 });
    assert.equal(byUrl.status, 200, byUrl.text.slice(0, 300));
    const sent = await postJson(s.url, { image: goldens()[0]!.png.toString('base64'), max_detections: 7 });
    assert.deepEqual(byUrl.json.detections, sent.json.detections);
    const moved = await postJson(s.url, { image_url: `${base}/moved` });
    assert.equal(moved.status, 200, 'a same-host redirect is followed');
  });

  test('refused: another host, a redirect to another host, a non-http scheme, image with image_url', async () => {
    const other = await postJson(s.url, { image_url: `http://localhost:${port}/cat.png` });
    assert.equal(other.status, 403);
    assert.equal(other.json.code, 'E_URL_NOT_ALLOWED');
    assert.match(other.json.detail, /image_url host "localhost" is not allowed: this server fetches only from 127\.0\.0\.1:\d+ \(--allow-url-host; a bare host means ports 80 and 443\)/);
    const away = await postJson(s.url, { image_url: `${base}/elsewhere` });
    assert.equal(away.status, 403);
    assert.match(away.json.detail, /redirects to "localhost:\d+", another host/);
    const file = await postJson(s.url, { image_url: 'file:///etc/passwd' });
    assert.equal(file.status, 403);
    assert.match(file.json.detail, /Expected an http:\/\/ or https:\/\/ URL for image_url but received "file:\/\/\/etc\/passwd"/);
    const both = await postJson(s.url, { image_url: `${base}/cat.png`, image: 'AAAA' });
    assert.equal(both.status, 422);
    const num = await postJson(s.url, { image_url: 5 });
    assert.match(num.json.detail, /Expected an http:\/\/ or https:\/\/ URL string of at most 8192 characters for image_url but received 5 of type number/);
  });

  test('a host:port entry opens that port only; a bare host only 80 and 443', async () => {
    const other = await postJson(s.url, { image_url: `http://127.0.0.1:${port + 1 > 65535 ? port - 1 : port + 1}/cat.png` });
    assert.equal(other.status, 403);
    assert.match(other.json.detail, /port \d+ of "127\.0\.0\.1" is not allowed/);
    const bare = await start({ allowUrlHosts: ['127.0.0.1'] });
    try {
      const r = await postJson(bare.url, { image_url: `${base}/cat.png` });
      assert.equal(r.status, 403, 'a bare host does not open an arbitrary port');
      assert.match(r.json.detail, /port \d+ of "127\.0\.0\.1" is not allowed: this server fetches only from 127\.0\.0\.1 \(--allow-url-host; a bare host means ports 80 and 443\)/);
    } finally {
      await bare.stop();
    }
  });

  test('a URL over 8 KiB is a short 422; a long URL is never echoed at length', async () => {
    const long = `${base}/${'a'.repeat(9000)}`;
    const r = await postJson(s.url, { image_url: long });
    assert.equal(r.status, 422);
    assert.ok(r.text.length < 600, `a ${r.text.length}-byte answer`);
    assert.match(r.json.detail, /at most 8192 characters/);
    const nearly = `${base}/nope-${'b'.repeat(8000)}`;
    const f = await postJson(s.url, { image_url: nearly });
    assert.equal(f.status, 502);
    assert.ok(f.text.length < 600, `a ${f.text.length}-byte answer`);
    assert.match(f.json.detail, /… \(\d+ characters\) could not be fetched/);
  });

  test('fetch failures: 404 and a redirect loop → 502 naming the URL', async () => {
    const missing = await postJson(s.url, { image_url: `${base}/nope.png` });
    assert.equal(missing.status, 502);
    assert.equal(missing.json.code, 'E_URL_FETCH');
    assert.match(missing.json.detail, /image_url "http:\/\/127\.0\.0\.1:\d+\/nope\.png" could not be fetched: the server answered 404/);
    const loop = await postJson(s.url, { image_url: `${base}/loop` });
    assert.equal(loop.status, 502);
    assert.match(loop.json.detail, /more than 3 redirects/);
  });
});

test('off by default: image_url is a 403 saying how to turn it on', async () => {
  const s = await start();
  try {
    const r = await postJson(s.url, { image_url: `${base}/cat.png` });
    assert.equal(r.status, 403);
    assert.match(r.json.detail, /image_url is off on this server: .* --allow-url-host HOST/);
  } finally {
    await s.stop();
  }
});

describe('the fetcher', () => {
  test('size cap: by Content-Length and while a chunked body arrives', async () => {
    const f = createUrlFetcher({ allowHosts: [`127.0.0.1:${port}`], maxBytes: 4000 });
    await assert.rejects(f(`${base}/big`), (e: any) => e.code === 'E_IMAGE_TOO_LARGE' && /5000 bytes or more; the limit is 4000 bytes/.test(e.message));
    await assert.rejects(f(`${base}/big-chunked`), (e: any) => e.code === 'E_IMAGE_TOO_LARGE' && /6000 bytes or more/.test(e.message));
    assert.equal((await createUrlFetcher({ allowHosts: [`127.0.0.1:${port}`], maxBytes: 6000 })(`${base}/big-chunked`)).length, 6000);
  });

  // /stall sends its headers and 10 bytes, then nothing: only a limit over the body too can end the fetch (the
  // test's own timeout turns a fetch that never ends into a failure).
  test('time limit over the whole fetch', { timeout: 30_000 }, async () => {
    const f = createUrlFetcher({ allowHosts: [`127.0.0.1:${port}`], maxBytes: 1000, timeoutMs: 300 });
    await assert.rejects(f(`${base}/stall`), (e: any) => e.code === 'E_URL_FETCH' && /no complete answer within 300 ms/.test(e.message));
  });

  test('a host name that resolves to a non-public address is refused unless the address itself is named', async (t) => {
    const name = os.hostname().toLowerCase();
    const addrs = await dns.lookup(name, { all: true }).catch(() => []);
    if (addrs.length === 0 || addrs.some((a) => isPublicAddress(a.address))) return skipOrFail(t, `${name} does not resolve to non-public addresses only here`);
    const url = `http://${name}:${port}/cat.png`;
    await assert.rejects(createUrlFetcher({ allowHosts: [`${name}:${port}`], maxBytes: 1 << 20 })(url), (e: any) => e.code === 'E_URL_NOT_ALLOWED' && /not a public address; name the address itself in --allow-url-host/.test(e.message));
    // The CLI's fetcher (no allow list: the user typed the URL) reaches it.
    assert.equal((await createUrlFetcher({ maxBytes: 1 << 20 })(url)).length, goldens()[0]!.png.length);
    // A private IP literal that is not the one allowed is refused before any connection.
    await assert.rejects(createUrlFetcher({ allowHosts: ['10.0.0.1', 'x'], maxBytes: 10 })('http://x/'), (e: any) => e.code !== undefined);
  });

  test('isPublicAddress: loopback, private, link-local, CGNAT, mapped and unique-local are not public', () => {
    for (const ip of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', '::', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', 'not-an-ip']) {
      assert.equal(isPublicAddress(ip), false, ip);
    }
    for (const ip of ['8.8.8.8', '1.1.1.1', '2606:4700::1111', '::ffff:8.8.8.8']) assert.equal(isPublicAddress(ip), true, ip);
  });
});
