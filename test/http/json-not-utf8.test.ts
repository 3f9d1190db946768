// A JSON body that is not UTF-8 is refused from its bytes, before any string is made of them: noise sent as
// application/json (40 MB of it cost the event loop 725 ms as a string, bench/redteam) is a 422 like any other
// body that is not JSON.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { goldens, postJson, start, u8, type Started } from './helpers.ts';

let s: Started;
before(async () => {
  s = await start();
});
after(() => s.stop());

const postBytes = async (url: string, body: Buffer) => {
  const res = await fetch(`${url}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: u8(body) });
  const text = await res.text();
  return { status: res.status, text, json: JSON.parse(text) };
};

test('json body: bytes that are not UTF-8 are a 422 naming the encoding; a UTF-8 body is answered', async () => {
  const b64 = goldens()[0]!.png.toString('base64');
  const noise = Buffer.alloc(64 * 1024, 0xa5);
  const r = await postBytes(s.url, noise);
  assert.equal(r.status, 422, r.text);
  assert.equal(r.json.code, 'E_SCHEMA');
  assert.match(r.json.detail, /not valid JSON \(it is not UTF-8 text/);
  const good = await postJson(s.url, { image: b64, threshold: 0.3 });
  assert.equal(good.status, 200, good.text);
});
