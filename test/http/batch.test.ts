// `images: [...]` on /predict: results in order, one per image, each with its own errors; the caps on count and
// bytes; the images of one request admitted to the engine queue together, then run one forward each.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { goldenResponder, goldens, postJson, start, u8, waitFor, type Started } from './helpers.ts';

let s: Started;
const b64 = (i: number) => goldens()[i]!.png.toString('base64');
// The 47.5 MB over-the-cap body, built before the server starts (postJson says why).
const OVER_CAP = u8(Buffer.from(JSON.stringify({ images: [Buffer.alloc(17 << 20).toString('base64'), Buffer.alloc(17 << 20).toString('base64')] })));
before(async () => {
  s = await start();
  s.backend.respond = goldenResponder;
});
after(() => s.stop());

test('three images → three results in order, each as the single-image form answers it', async () => {
  const calls = s.backend.calls;
  const r = await postJson(s.url, { images: [b64(2), b64(0), b64(1)], threshold: 0.3 });
  assert.equal(r.status, 200, r.text.slice(0, 300));
  assert.equal(r.json.results.length, 3);
  assert.equal(s.backend.calls - calls, 3, 'one forward per image');
  for (const [k, i] of [2, 0, 1].entries()) {
    const single = await postJson(s.url, { image: b64(i), threshold: 0.3 });
    const g = goldens()[i]!;
    assert.deepEqual(r.json.results[k].image_size, { width: g.width, height: g.height });
    assert.deepEqual(r.json.results[k].detections, single.json.detections, `results[${k}] is ${g.name}`);
    assert.equal(r.json.results[k].threshold, 0.3);
  }
});

test('a bad image gets its own error; the others are answered', async () => {
  const r = await postJson(s.url, { images: [b64(0), Buffer.from('not an image').toString('base64'), '!!', b64(1)] });
  assert.equal(r.status, 200, r.text.slice(0, 300));
  const [a, bad, notB64, b] = r.json.results;
  assert.equal(a.num_detections, goldens()[0]!.detections['0.5']!.length);
  assert.equal(bad.code, 'E_IMAGE_UNDECODABLE');
  assert.equal(bad.status, 400);
  assert.match(bad.detail, /image could not be decoded/);
  assert.equal(notB64.code, 'E_IMAGE_UNDECODABLE');
  assert.match(notB64.detail, /not valid base64/);
  assert.deepEqual(b.image_size, { width: goldens()[1]!.width, height: goldens()[1]!.height });
});

test('the caps: at most 16 images, 32 MiB in all; image and images together, an empty list, a non-string → 422', async () => {
  const calls = s.backend.calls;
  const many = await postJson(s.url, { images: Array.from({ length: 17 }, () => 'AAAA') });
  assert.equal(many.status, 422);
  assert.match(many.json.detail, /Expected a non-empty array of at most 16 base64 strings .* for images but received an array of length 17/);
  const big = await postJson(s.url, OVER_CAP);
  assert.equal(big.status, 400);
  assert.equal(big.json.code, 'E_IMAGE_TOO_LARGE');
  assert.match(big.json.detail, /the 2 images total about 35651584 bytes .* the limit for one request is 33554432 bytes/);
  const both = await postJson(s.url, { image: b64(0), images: [b64(0)] });
  assert.equal(both.status, 422);
  assert.match(both.json.detail, /Expected either image \(one image\) or images \(several\), not both for image/);
  const empty = await postJson(s.url, { images: [] });
  assert.equal(empty.status, 422);
  const num = await postJson(s.url, { images: [b64(0), 7] });
  assert.equal(num.json.field, 'images[1]');
  assert.match(num.json.detail, /Expected a base64 string .* for images\[1\] but received 7 of type number/);
  const thr = await postJson(s.url, { images: [b64(0)], threshold: 2 });
  assert.match(thr.json.detail, /for threshold but received 2 of type number/);
  assert.equal(s.backend.calls, calls, 'no refused request reaches the engine');
});

test('admitted together: every image counts in the queue from admission; a batch that does not fit is refused whole (503), at once', async () => {
  // Clients told apart by X-Forwarded-For (trusted here), so the global bound and the per-client share both show.
  const q = await start({ queueSize: 4, trustProxy: true });
  const as = (c: string) => ({ 'x-forwarded-for': c });
  try {
    const release = q.backend.block();
    const first = postJson(q.url, { image: b64(0) }, as('a'));
    await waitFor(() => q.backend.calls === 1, 'the first forward to start');
    assert.equal(q.srv.admission.queued, 0, 'an image on the engine has left the queue');
    const pair = postJson(q.url, { images: [b64(0), b64(0)] }, as('b'));
    const single = postJson(q.url, { image: b64(0) }, as('c'));
    await waitFor(() => q.srv.admission.queued === 3, 'three images admitted');
    const refused = await postJson(q.url, { images: [b64(0), b64(0)] }, as('d'));
    assert.equal(refused.status, 503);
    assert.equal(refused.json.code, 'E_QUEUE_FULL');
    assert.match(refused.json.detail, /cannot take this request's 2 images \(3 of 4 places taken/);
    assert.ok(Number(refused.headers.get('retry-after')) >= 1);
    // One client's share is half the queue: b holds 2 of 2.
    const over = await postJson(q.url, { image: b64(0) }, as('b'));
    assert.equal(over.status, 503);
    assert.match(over.json.detail, /you already have 2 images queued and one client may have 2/);
    const tooMany = await postJson(q.url, { images: [b64(0), b64(0), b64(0)] }, as('e'));
    assert.equal(tooMany.status, 503);
    assert.match(tooMany.json.detail, /3 images are more than one client may have queued \(2, half of --queue-size 4\)/);
    // Refused on its count before its items are decoded from base64: items that are not base64 at all would
    // otherwise each get their own 400 in a 200 (none of them needs a place).
    const unread = await postJson(q.url, { images: ['!!', '!!'] }, as('b'));
    assert.equal(unread.status, 503, unread.text.slice(0, 300));
    assert.match(unread.json.detail, /you already have 2 images queued and one client may have 2/);
    // ... and before its body is parsed: a field the schema refuses (422 when it fits) is not looked at.
    const unparsed = await postJson(q.url, { images: [b64(0)], threshold: 2 }, as('b'));
    assert.equal(unparsed.status, 503, unparsed.text.slice(0, 300));
    assert.equal(q.backend.calls, 1, 'no refused image reached the engine');
    release();
    assert.equal((await first).status, 200);
    assert.equal((await pair).status, 200);
    assert.equal((await single).status, 200);
    assert.equal(q.srv.admission.queued, 0, 'every place was given back');
    assert.equal(q.backend.calls, 4);
  } finally {
    q.backend.release();
    await q.stop();
  }
});

test('a key spelled with an escape ("\\u0069mages") does not fool the quick count: the batch JSON.parse sees (its last "images") is the one admitted', async () => {
  const q = await start({ queueSize: 4 });
  try {
    // Three images in the first "images", one in the escaped duplicate that JSON.parse keeps: one image, which fits.
    const body = `{"images":["${b64(0)}","${b64(0)}","${b64(0)}"],"\\u0069mages":["${b64(0)}"]}`;
    const r = await postJson(q.url, body);
    assert.equal(r.status, 200, r.text.slice(0, 300));
    assert.equal(r.json.results.length, 1);
    assert.equal(q.backend.calls, 1);
  } finally {
    await q.stop();
  }
});

test('an engine failure is that image\'s error; the response still validates', async () => {
  s.backend.fail = new Error('boom');
  try {
    const r = await postJson(s.url, { images: [b64(0)] });
    assert.equal(r.status, 200);
    assert.equal(r.json.results[0].code, 'E_INFERENCE');
    assert.equal(r.json.results[0].status, 500);
    assert.match(r.json.results[0].detail, /inference failed: Error: boom/);
  } finally {
    s.backend.fail = undefined;
  }
});
