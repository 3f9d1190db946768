// Property-based tests (fast-check) of the server's own body parsers on generated hostile bodies, bounded by a run
// COUNT (RFDETR_PROPERTY_RUNS, default 400 per property; never by time) and a fixed seed (RFDETR_PROPERTY_SEED) so
// a run is reproducible; a failure prints the seed, the path and the shrunk body to replay it.
//   - extractJsonImage (the JSON fast path): whatever it answers equals what the full parse answers.
//   - countBatchImages (the quick batch count): a count it gives for a body JSON.parse reads is the length of the
//     `images` array it sees (a body JSON.parse refuses gets its 422 whatever the count let through first).
//   - the multipart reader (busboy behind createBodyReader): every body, cut or garbled, settles with the image
//     or an RfdetrError (never another error, an unhandled event or a hang), and a well-formed one gives the
//     image part's exact bytes.
// Why fast-check and not @jazzer.js/core: sidecar/fuzz/README.md ("The TypeScript side").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isUtf8 } from 'node:buffer';
import { PassThrough } from 'node:stream';
import fc from 'fast-check';
import type { Request, Response } from 'express';
import { countBatchImages, extractJsonImage } from '../../src/http/json-image.ts';
import { decodeBase64Image } from '../../src/http/params.ts';
import { createBodyReader } from '../../src/http/body.ts';
import { isRfdetrError } from '../../src/errors.ts';

const RUNS = Number(process.env.RFDETR_PROPERTY_RUNS ?? 400);
const SEED = Number(process.env.RFDETR_PROPERTY_SEED ?? 36);
const params = { numRuns: RUNS, seed: SEED, endOnFailure: false };
const MAX = 1 << 20;

/**
 * What the full path makes of a JSON body (json-image.test.ts): body.ts's parse (bytes that are not UTF-8 refused,
 * one leading BOM dropped, as express.json does), JSON.parse, then the image field's base64 rules.
 */
function fullPath(body: Buffer): { fields: Record<string, unknown>; image: Buffer } | 'error' {
  try {
    if (!isUtf8(body)) return 'error';
    const text = body.toString('utf8');
    const { image, ...fields } = JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text) as Record<string, unknown>;
    return { fields: { ...fields, image: '' }, image: decodeBase64Image(image, MAX) };
  } catch {
    return 'error';
  }
}

// ---- JSON bodies: mostly the plain case the fast path takes ({"image": "<base64>", ...} with the image member at
// ---- the top level), its value's text edited with JSON escapes and non-base64 characters, other members (keys
// ---- spelled plainly or with \u escapes, nesting, odd whitespace) around it; then an optional mutation (a cut, an
// ---- inserted or replaced byte, a BOM). One body in five is a batch ({"images": [...]}), one looser (any members).
const b64Text = fc.uint8Array({ minLength: 1, maxLength: 48 }).chain((b) => {
  const plain = Buffer.from(b).toString('base64');
  const edit = fc.tuple(fc.nat(), fc.constantFrom('-', '_', '=', '\\/', '\\u0041', '\\n', ' ', 'A', '==', '\\\\'));
  return fc.oneof({ weight: 2, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: fc.array(edit, { minLength: 1, maxLength: 2 }) }).map((edits) =>
    edits.reduce((t, [at, e]) => { const i = at % (t.length + 1); return t.slice(0, i) + e + t.slice(i + (e.length === 1 && at % 2 ? 1 : 0)); }, plain));
});
const imageValue = fc.oneof(
  { weight: 4, arbitrary: b64Text.map((t) => `"${t}"`) },
  { weight: 1, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 30 }).map((b) => `"${Buffer.from(b).toString('base64url')}"`) },
  { weight: 1, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 30 }).map((b) => `"data:image/png;base64,${Buffer.from(b).toString('base64')}"`) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 1 }).map((v) => JSON.stringify(v) ?? 'null') },
);
const escapeKey = (k: string, mask: number) => [...k].map((c, i) => ((mask >> i) & 1 ? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}` : c)).join('');
const ws = fc.constantFrom('', '', ' ', '\n', '\t', '\r\n  ');
const keyText = fc.tuple(fc.constantFrom('image', 'images', 'image_url', 'threshold', 'classes', 'x'), fc.nat(0xff)).map(([k, m]) => (m & 1 ? escapeKey(k, m >> 1) : k));
const otherValue = fc.oneof(fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v) ?? 'null'), imageValue, fc.array(imageValue, { maxLength: 3 }).map((a) => `[${a.join(',')}]`));
const member = (k: fc.Arbitrary<string>, v: fc.Arbitrary<string>) => fc.tuple(ws, k, ws, v).map(([a, kk, b, vv]) => `${a}"${kk}"${b}:${a}${vv}`);
const plainBody = fc.tuple(fc.array(member(keyText, otherValue), { maxLength: 3 }), member(fc.constant('image'), imageValue), fc.array(member(keyText, otherValue), { maxLength: 3 }), ws)
  .map(([before, image, after, pad]) => `${pad}{${[...before, image, ...after].join(',')}}${pad}`);
const looseBody = fc.tuple(fc.array(member(keyText, otherValue), { maxLength: 5 }), fc.boolean()).map(([members, nest]) => {
  const inner = `{${members.join(',')}}`;
  return nest ? `{"wrap":${inner}${members.length ? `,${members[0]}` : ''}}` : inner;
});
const batchBody = fc.tuple(fc.array(member(keyText, otherValue), { maxLength: 3 }), member(fc.constant('images'), fc.array(b64Text.map((t) => `"${t}"`), { maxLength: 4 }).map((a) => `[${a.join(',')}]`)), fc.array(member(keyText, otherValue), { maxLength: 3 }))
  .map(([before, images, after]) => `{${[...before, images, ...after].join(',')}}`);
const jsonBody = fc.oneof({ weight: 3, arbitrary: plainBody }, { weight: 1, arbitrary: batchBody }, { weight: 1, arbitrary: looseBody });
const mutation = fc.oneof(
  { weight: 4, arbitrary: fc.constant((s: Buffer) => s) },
  { weight: 1, arbitrary: fc.nat().map((n) => (s: Buffer) => s.subarray(0, n % (s.length + 1))) },
  { weight: 1, arbitrary: fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })).map(([n, c]) => (s: Buffer) => Buffer.concat([s.subarray(0, n % (s.length + 1)), Buffer.from([c]), s.subarray(n % (s.length + 1))])) },
  { weight: 1, arbitrary: fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })).map(([n, c]) => (s: Buffer) => { const b = Buffer.from(s); if (b.length) b[n % b.length] = c; return b; }) },
  { weight: 1, arbitrary: fc.constant((s: Buffer) => Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), s])) },
);
const hostileJson = fc.tuple(jsonBody, mutation).map(([t, m]) => m(Buffer.from(t)));

test('body properties: the JSON fast path answers a body only as the full parse would', () => {
  fc.assert(
    fc.property(hostileJson, (body) => {
      const quick = extractJsonImage(body, MAX);
      if (quick !== undefined) assert.deepEqual(quick, fullPath(body));
    }),
    params,
  );
});

// Issue 36 item 5: an escaped duplicate key ("\u0069mages") fooled the quick count (the full parse still held the
// limit); countBatchImages now leaves a body with an escaped top-level key to the full parse.
test('body properties: a quick batch count is the length of the images array JSON.parse sees', () => {
  fc.assert(
    fc.property(hostileJson, (body) => {
      const n = countBatchImages(body);
      if (n === undefined) return;
      let parsed: Record<string, unknown>;
      try {
        parsed = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
      } catch {
        return; // the full parse refuses it (422) whatever the count let through first
      }
      assert.ok(Array.isArray(parsed.images), 'a counted body has an images array');
      assert.equal(n, (parsed.images as unknown[]).length);
    }),
    params,
  );
});

// ---- multipart bodies: an image part of random bytes and text fields, under a random boundary; then a mutation.
const reader = createBodyReader({ maxImageBytes: MAX, maxBodyBytes: 4 * MAX });
const boundary = fc.stringMatching(/^[A-Za-z0-9'()+_,./:=?-]{1,40}$/).filter((b) => !b.endsWith(' '));
const field = fc.tuple(fc.constantFrom('threshold', 'max_detections', 'classes', 'image', 'other'), fc.string({ maxLength: 12 }));
const multipart = fc.record({
  boundary,
  image: fc.uint8Array({ maxLength: 256 }),
  fields: fc.array(field, { maxLength: 3 }),
  imageFirst: fc.boolean(),
  crlf: fc.boolean(),
});
function multipartBytes(m: { boundary: string; image: Uint8Array; fields: Array<[string, string]>; imageFirst: boolean; crlf: boolean }): Buffer {
  const nl = m.crlf ? '\r\n' : '\n';
  const parts: Buffer[] = m.fields.map(([n, v]) => Buffer.from(`--${m.boundary}${nl}Content-Disposition: form-data; name="${n}"${nl}${nl}${v}${nl}`));
  const img = Buffer.concat([
    Buffer.from(`--${m.boundary}${nl}Content-Disposition: form-data; name="image"; filename="x.png"${nl}Content-Type: image/png${nl}${nl}`),
    Buffer.from(m.image),
    Buffer.from(nl),
  ]);
  if (m.imageFirst) parts.unshift(img);
  else parts.push(img);
  return Buffer.concat([...parts, Buffer.from(`--${m.boundary}--${nl}`)]);
}

type Settled = { ok: true; image: Buffer } | { ok: false; error: unknown };

/** Feeds `body` to the multipart reader as a request stream and waits for its answer. */
async function readMultipart(body: Buffer, contentType: string): Promise<Settled> {
  const req = new PassThrough() as unknown as Request;
  (req as unknown as { headers: Record<string, string> }).headers = { 'content-type': contentType };
  const answer = reader(req, {} as Response, 'multipart').then(
    (r) => ({ ok: true as const, image: (r as { image: Buffer }).image }),
    (error: unknown) => ({ ok: false as const, error }),
  );
  (req as unknown as PassThrough).end(body);
  return answer;
}

test('body properties: a well-formed multipart body gives the image part exactly', async () => {
  await fc.assert(
    fc.asyncProperty(multipart.filter((m) => m.image.length > 0), async (m) => {
      const only = { ...m, fields: [], crlf: true }; // RFC 2046: CRLF line breaks
      const r = await readMultipart(multipartBytes(only), `multipart/form-data; boundary="${m.boundary}"`);
      assert.ok(r.ok, `rejected: ${r.ok ? '' : String(r.error)}`);
      assert.deepEqual(r.image, Buffer.from(m.image));
    }),
    params,
  );
});

test('body properties: every multipart body, cut or garbled, settles with an image or an RfdetrError', async () => {
  await fc.assert(
    fc.asyncProperty(multipart, mutation, fc.boolean(), async (m, mutate, quoted) => {
      const ct = `multipart/form-data; boundary=${quoted ? `"${m.boundary}"` : m.boundary}`;
      const r = await readMultipart(mutate(multipartBytes(m)), ct);
      if (!r.ok) assert.ok(isRfdetrError(r.error), `not an RfdetrError: ${String(r.error)}`);
    }),
    params,
  );
});
