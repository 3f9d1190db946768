// POST /predict ahead of express's router (src/http/predict-route.ts) and its plain body read (body.ts
// readPlainBody): the listener takes /predict past the router, and every answer it gives (success, the
// errors of the middlewares it runs, the body forms) is the answer the app alone gives on a listener of its own.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { ApiKeys } from '../../src/http/auth.ts';
import { isPredictRequest } from '../../src/http/predict-route.ts';
import { goldens, start, waitFor, type Started } from './helpers.ts';

test('isPredictRequest: POST /predict with or without a query, nothing else', () => {
  assert.equal(isPredictRequest('POST', '/predict'), true);
  assert.equal(isPredictRequest('POST', '/predict?threshold=0.3'), true);
  for (const [m, u] of [['GET', '/predict'], ['HEAD', '/predict'], ['POST', '/predict/'], ['POST', '/PREDICT'], ['POST', '/predict/video'], ['POST', '/predictx'], ['POST', '//predict'], ['POST', undefined]] as const) {
    assert.equal(isPredictRequest(m, u), false, `${m} ${u}`);
  }
});

/** A second listener on the app alone (express's router for every route), as before predict-route.ts. */
async function appOnly(s: Started): Promise<{ url: string; close: () => void }> {
  const side = http.createServer(s.srv.app).listen(0, '127.0.0.1');
  await new Promise((r) => side.once('listening', r));
  return { url: `http://127.0.0.1:${(side.address() as AddressInfo).port}`, close: () => side.close() };
}

interface Answer {
  status: number;
  body: any;
  headers: Record<string, string | null>;
}

async function ask(url: string, path: string, init: RequestInit): Promise<Answer> {
  const res = await fetch(url + path, init);
  const text = await res.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: compared as text
  }
  if (body && typeof body === 'object') {
    delete body.request_id;
    if (body.timing_ms) body.timing_ms = Object.keys(body.timing_ms);
  }
  const headers: Record<string, string | null> = {};
  for (const h of ['content-type', 'content-length', 'connection', 'www-authenticate', 'allow', 'retry-after']) headers[h] = res.headers.get(h);
  headers['x-request-id'] = res.headers.get('x-request-id') ? 'set' : null;
  headers['server-timing'] = res.headers.get('server-timing') ? 'set' : null;
  if (body && typeof body === 'object' && body.timing_ms) headers['content-length'] = 'varies';
  return { status: res.status, body, headers };
}

describe('the listener and the app answer /predict alike', () => {
  const png = () => goldens()[0]!.png;
  const cases: Array<[string, string, RequestInit]> = [
    ['json', '/predict', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ image: png().toString('base64'), threshold: 0.3 }) }],
    ['json with charset', '/predict', { method: 'POST', headers: { 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify({ image: png().toString('base64') }) }],
    ['raw with a query', '/predict?threshold=0.9&max_detections=1', { method: 'POST', headers: { 'content-type': 'image/png' }, body: new Uint8Array(png()) }],
    ['octet-stream', '/predict', { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: new Uint8Array(png()) }],
    ['empty raw body', '/predict', { method: 'POST', headers: { 'content-type': 'image/png' }, body: new Uint8Array(0) }],
    ['bad query field', '/predict?threshold=2', { method: 'POST', headers: { 'content-type': 'image/png' }, body: new Uint8Array(png()) }],
    ['not JSON', '/predict', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"image": ' }],
    ['unsupported type', '/predict', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hello' }],
    ['undecodable image', '/predict', { method: 'POST', headers: { 'content-type': 'image/jpeg' }, body: 'not a jpeg' }],
    ['trailing slash', '/predict/', { method: 'POST', headers: { 'content-type': 'image/png' }, body: new Uint8Array(png()) }],
    ['wrong method', '/predict', { method: 'GET' }],
  ];

  test('without keys', async () => {
    const s = await start();
    const side = await appOnly(s);
    try {
      for (const [name, path, init] of cases) {
        const a = await ask(s.url, path, init);
        const b = await ask(side.url, path, init);
        assert.deepEqual(a, b, name);
      }
      const ok = await ask(s.url, '/predict', cases[0]![2]);
      assert.equal(ok.status, 200);
      assert.equal(ok.headers['server-timing'], 'set');
    } finally {
      side.close();
      await s.stop();
    }
  });

  test('with keys: 401 without or with a wrong key, the same answers with the right one', async () => {
    const s = await start({ apiKeys: new ApiKeys(['k-1']) });
    const side = await appOnly(s);
    try {
      for (const key of [undefined, 'wrong', 'k-1']) {
        for (const [name, path, init] of cases.slice(0, 4)) {
          const withKey = { ...init, headers: { ...(init.headers as Record<string, string>), ...(key ? { authorization: `Bearer ${key}` } : {}) } };
          const a = await ask(s.url, path, withKey);
          const b = await ask(side.url, path, withKey);
          assert.deepEqual(a, b, `${name}, key ${key}`);
          assert.equal(a.status, key === 'k-1' ? 200 : 401, `${name}, key ${key}`);
        }
      }
    } finally {
      side.close();
      await s.stop();
    }
  });
});

test('the listener takes POST /predict past the router and everything else to it', async () => {
  const s = await start();
  // express's app.handle is where the router starts (not in its types): count the requests it sees.
  const app = s.srv.app as unknown as { handle: (...a: unknown[]) => unknown };
  const handle = app.handle.bind(app);
  let routed = 0;
  app.handle = (...a: unknown[]) => {
    routed++;
    return handle(...a);
  };
  try {
    const body = new Uint8Array(goldens()[0]!.png);
    assert.equal((await fetch(`${s.url}/predict`, { method: 'POST', headers: { 'content-type': 'image/png' }, body })).status, 200);
    assert.equal((await fetch(`${s.url}/predict?threshold=0.4`, { method: 'POST', headers: { 'content-type': 'image/png' }, body })).status, 200);
    assert.equal(routed, 0);
    assert.equal((await fetch(`${s.url}/health`)).status, 200);
    assert.equal((await fetch(`${s.url}/predict/`, { method: 'POST', headers: { 'content-type': 'image/png' }, body })).status, 404);
    assert.equal(routed, 2);
    // The request log and the metrics see a /predict of the listener as one of the app's.
    const m = await (await fetch(`${s.url}/metrics`)).text();
    assert.match(m, /^rfdetr_http_requests_total\{route="\/predict",method="POST",status="200"\} 2$/m);
    assert.equal(s.logs.filter((l) => l.event === 'request' && l.route === '/predict' && l.status === 200).length, 2);
  } finally {
    await s.stop();
  }
});

describe('the plain body read', () => {
  test('a raw body written in pieces gives the answer of the same body in one write', async () => {
    const s = await start();
    try {
      const png = goldens()[0]!.png;
      const { port } = new URL(s.url);
      const head = `POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: ${png.length}\r\nConnection: close\r\n\r\n`;
      const answer = (pieces: Buffer[]) => new Promise<string>((resolve, reject) => {
        const sock = net.connect(Number(port), '127.0.0.1');
        let out = '';
        sock.on('data', (d) => (out += d.toString('latin1')));
        sock.on('error', reject);
        sock.on('close', () => resolve(out));
        // Each piece once the previous one is with the kernel: the server sees several chunks.
        const next = (i: number) => (i < pieces.length ? sock.write(pieces[i]!, () => setImmediate(() => next(i + 1))) : undefined);
        next(0);
      });
      const detections = (text: string) => JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)).detections;
      const whole = await answer([Buffer.concat([Buffer.from(head), png])]);
      const third = Math.floor(png.length / 3);
      const pieces = await answer([Buffer.from(head), png.subarray(0, third), png.subarray(third, 2 * third), png.subarray(2 * third)]);
      assert.match(whole, /^HTTP\/1\.1 200 /);
      assert.match(pieces, /^HTTP\/1\.1 200 /);
      assert.deepEqual(detections(pieces), detections(whole));
    } finally {
      await s.stop();
    }
  });

  test('an upload cut off before its Content-Length ends as E_ABORTED, and the server answers the next one', async () => {
    const s = await start();
    try {
      const { port } = new URL(s.url);
      await new Promise<void>((resolve, reject) => {
        const sock = net.connect(Number(port), '127.0.0.1', () => {
          sock.write(`POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: image/png\r\nContent-Length: 100000\r\n\r\n`);
          sock.write(Buffer.alloc(1000, 7), () => sock.destroy());
        });
        sock.on('error', reject);
        sock.on('close', () => resolve());
      });
      // The read settles (its body slot is given back) and the request ends as a client that went away.
      await waitFor(() => s.srv.admission.bodiesInFlight === 0 && s.logs.some((l) => l.event === 'request' && l.route === '/predict' && l.client_closed === true), 'the cut-off upload to end');
      assert.match(await (await fetch(`${s.url}/metrics`)).text(), /^rfdetr_predict_rejected_total\{code="E_ABORTED"\} 1$/m);
      const ok = await fetch(`${s.url}/predict`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: new Uint8Array(goldens()[0]!.png) });
      assert.equal(ok.status, 200);
    } finally {
      await s.stop();
    }
  });
});
