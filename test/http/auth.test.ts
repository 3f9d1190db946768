// API keys: 401 with WWW-Authenticate without a key or with a wrong one, 200 with the right one (Bearer or
// X-API-Key), the probes open, /metrics and /docs behind their flags, a reload takes effect, and no key is
// ever written to the log.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ApiKeys, parseKeys, readKeys } from '../../src/http/auth.ts';
import { goldens, postJson, start } from './helpers.ts';

const KEY = 'k-3b1f9a0c5e7d2468';
const b64 = goldens()[0]!.png.toString('base64');

test('keys on: 401 without or with a wrong key, 200 with the right one; probes open, /metrics and /docs closed', async () => {
  const s = await start({ apiKeys: new ApiKeys([KEY, 'another-key-0001']) });
  try {
    const none = await postJson(s.url, { image: b64 });
    assert.equal(none.status, 401);
    assert.equal(none.json.code, 'E_UNAUTHORIZED');
    assert.equal(none.headers.get('www-authenticate'), 'Bearer realm="rfdetr"');
    assert.match(none.json.detail, /"Authorization: Bearer KEY" or "X-API-Key: KEY"/);
    const wrong = await postJson(s.url, { image: b64 }, { authorization: `Bearer ${KEY}x` });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.headers.get('www-authenticate'), 'Bearer realm="rfdetr", error="invalid_token"');
    assert.doesNotMatch(wrong.text, new RegExp(KEY));
    assert.equal((await postJson(s.url, { image: b64 }, { authorization: `Bearer ${KEY}` })).status, 200);
    assert.equal((await postJson(s.url, { image: b64 }, { 'x-api-key': KEY })).status, 200);
    assert.equal(s.backend.calls, 2, 'refused requests never reach the engine');
    for (const p of ['/health', '/ready', '/v1/health', '/tt-liveness']) assert.equal((await fetch(`${s.url}${p}`)).status, 200, p);
    for (const p of ['/metrics', '/docs', '/openapi.json', '/info', '/v1/models']) {
      assert.equal((await fetch(`${s.url}${p}`)).status, 401, p);
      assert.equal((await fetch(`${s.url}${p}`, { headers: { 'x-api-key': KEY } })).status, 200, p);
    }
    assert.ok(s.logs.length > 0);
    assert.doesNotMatch(JSON.stringify(s.logs), new RegExp(KEY), 'no key in the log');
  } finally {
    await s.stop();
  }
});

test('keys on: a key in both Authorization and X-API-Key is refused (401 invalid_request), whichever is right; Basic beside X-API-Key is not a second key', async () => {
  const s = await start({ apiKeys: new ApiKeys([KEY]) });
  try {
    for (const [auth, x] of [[KEY, 'wrong-key-0009'], ['wrong-key-0009', KEY], [KEY, KEY]] as const) {
      const r = await postJson(s.url, { image: b64 }, { authorization: `Bearer ${auth}`, 'x-api-key': x });
      assert.equal(r.status, 401, `Bearer ${auth === KEY ? 'right' : 'wrong'} + X-API-Key ${x === KEY ? 'right' : 'wrong'}`);
      assert.equal(r.json.code, 'E_UNAUTHORIZED');
      assert.match(r.json.detail, /two API keys, "Authorization: Bearer …" and "X-API-Key: …": expected exactly one/);
      assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="rfdetr", error="invalid_request"');
      assert.doesNotMatch(r.text, new RegExp(KEY));
    }
    assert.equal(s.backend.calls, 0, 'refused requests never reach the engine');
    const basic = await postJson(s.url, { image: b64 }, { authorization: 'Basic cHJveHk6cGFzcw==', 'x-api-key': KEY });
    assert.equal(basic.status, 200, 'a proxy\'s Basic credentials are not an API key');
  } finally {
    await s.stop();
  }
});

test('keys on with --open-metrics and --open-docs: those answer without a key; a reload replaces the keys', async () => {
  const keys = new ApiKeys([KEY]);
  const s = await start({ apiKeys: keys, openMetrics: true, openDocs: true });
  try {
    for (const p of ['/metrics', '/docs', '/openapi.json']) assert.equal((await fetch(`${s.url}${p}`)).status, 200, p);
    assert.equal((await fetch(`${s.url}/info`)).status, 401);
    keys.set(['rotated-key-0002']);
    assert.equal((await postJson(s.url, { image: b64 }, { 'x-api-key': KEY })).status, 401, 'the old key is gone');
    assert.equal((await postJson(s.url, { image: b64 }, { 'x-api-key': 'rotated-key-0002' })).status, 200);
  } finally {
    await s.stop();
  }
});

test('keys off (none given): every route is open', async () => {
  const s = await start();
  try {
    assert.equal((await postJson(s.url, { image: b64 })).status, 200);
    assert.equal((await fetch(`${s.url}/metrics`)).status, 200);
  } finally {
    await s.stop();
  }
});

test('key sources: a file (comments and blank lines skipped), the environment, and the errors that name the entry, not the key', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-keys-'));
  try {
    const f = path.join(dir, 'keys');
    fs.writeFileSync(f, `# operators\n${KEY}\n\n  second-key-0003  \n`);
    assert.deepEqual(readKeys({ file: f, env: 'ignored-when-a-file-is-given' }), [KEY, 'second-key-0003']);
    assert.deepEqual(readKeys({ env: 'a-key-0004, b-key-0005 c-key-0006' }), ['a-key-0004', 'b-key-0005', 'c-key-0006']);
    assert.deepEqual(readKeys({}), []);
    fs.writeFileSync(f, '# nothing\n');
    assert.throws(() => readKeys({ file: f }), /holds no key: expected one API key per line/);
    assert.throws(() => readKeys({ file: path.join(dir, 'missing') }), /cannot read it \(ENOENT\)/);
    assert.throws(() => parseKeys('good-key\nbad\x01key', 'FILE', /\n/), (e: Error) => /FILE: entry 2 contains whitespace or control characters/.test(e.message) && !e.message.includes('bad'));
    const k = new ApiKeys([KEY]);
    assert.match(k.match(KEY)!, /^key:[0-9a-f]{8}$/);
    assert.equal(k.match(KEY.slice(0, -1)), null);
    assert.equal(k.match(''), null);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
