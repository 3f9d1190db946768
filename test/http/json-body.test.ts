// The JSON body's two parses (the image taken from the raw bytes, or the whole body through JSON.parse) answer
// every body alike: the same detections for the same image, the same errors, whatever the charset and BOM.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { goldens, postJson, start, u8, type Started } from './helpers.ts';

let s: Started;
before(async () => {
  s = await start();
});
after(() => s.stop());

test('json body: plain, with a BOM, as UTF-16 and with a data: prefix, the image gives the same answer', async () => {
  const g = goldens()[0]!;
  const b64 = g.png.toString('base64');
  const plain = await postJson(s.url, { image: b64, threshold: 0.3 });
  assert.equal(plain.status, 200, plain.text);
  const strip = (j: any) => ({ ...j, timing_ms: undefined });
  const bom = await postJson(s.url, `\ufeff${JSON.stringify({ image: b64, threshold: 0.3 })}`);
  assert.deepEqual(strip(bom.json), strip(plain.json));
  const utf16 = await fetch(`${s.url}/predict`, {
    method: 'POST', headers: { 'content-type': 'application/json; charset=utf-16le' },
    body: u8(Buffer.from(JSON.stringify({ threshold: 0.3, image: b64 }), 'utf16le')),
  });
  assert.equal(utf16.status, 200);
  assert.deepEqual(strip(await utf16.json()), strip(plain.json));
  const dataUrl = await postJson(s.url, { image: `data:image/png;base64,${b64}`, threshold: 0.3 }, { 'content-type': 'application/json; charset=UTF-8' });
  assert.deepEqual(strip(dataUrl.json), strip(plain.json));
});

test('json body: an empty body, a syntax error after the image, a duplicate image and a bad charset keep their errors', async () => {
  const b64 = goldens()[0]!.png.toString('base64');
  const empty = await postJson(s.url, '');
  assert.equal(empty.status, 422);
  assert.match(empty.json.detail, /for image but received nothing/);
  const broken = await postJson(s.url, `{"image":"${b64}", "threshold": }`);
  assert.equal(broken.status, 422);
  assert.match(broken.json.detail, /not valid JSON/);
  const dup = await postJson(s.url, `{"image":"${b64}","image":""}`);
  assert.equal(dup.status, 400, 'JSON.parse keeps the last "image": the empty one');
  assert.match(dup.json.detail, /image is empty/);
  const latin1 = await postJson(s.url, { image: b64 }, { 'content-type': 'application/json; charset=latin1' });
  assert.equal(latin1.status, 415);
});
