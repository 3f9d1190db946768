// The reference app's JSON body, {"image": "<base64>", ...}, parsed from the raw body bytes without making a JS string
// of the whole body: the top-level `image` member's base64 text is located in the buffer and decoded from
// it, and only the rest (a few dozen bytes of fields) goes through JSON.parse. On this host that took a
// 1 MB body from 2–12 ms of parse (UTF-8 decode + JSON.parse + the base64 checks on a 1 MB string) to
// about 1 ms (bench/server). It is a fast path only: it answers for the plain case (one top-level `image`
// whose value is standard base64 with no escapes and no data: prefix) and returns undefined otherwise, and
// the caller then parses the whole body as before, so every other body gets exactly the answer it got before.
// The base64 is decoded 64 KB of text at a time, each piece a small latin1 string written straight into the
// image's buffer: one string of the whole value, its decode into a new Buffer and the re-encode that checked
// it took 1.2-1.4 ms for a 557 KB value (the 640x480 PNG), the pieces 0.15 ms (bench/server/RESULTS.md section 6).

import { isUtf8 } from 'node:buffer';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const EQUALS = 0x3d;
/**
 * Base64 characters turned into a string at a time: a multiple of 4, so each piece decodes on its own, and
 * small enough to be a young-generation string (a 557 KB one is allocated in large-object space: 0.5 ms).
 */
const CHUNK = 1 << 16;
const KEY = Buffer.from('"image"');

const isWs = (c: number | undefined) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

/**
 * Where a body's JSON text starts: after a UTF-8 byte order mark (EF BB BF) and whitespace. The full parse
 * (body.ts, parseJsonBytes) ignores a BOM as express.json does (RFC 8259 section 8.1 lets a parser ignore it),
 * so the fast paths do too: a BOM must not buy a body the full parse's cost, nor another answer.
 */
function textStart(b: Buffer): number {
  let i = b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf ? 3 : 0;
  while (isWs(b[i])) i++;
  return i;
}

/** Whether the byte at `q` is escaped: an odd number of backslashes right before it. */
function escapedAt(b: Buffer, q: number): boolean {
  let n = 0;
  while (q - 1 - n >= 0 && b[q - 1 - n] === BACKSLASH) n++;
  return n % 2 === 1;
}

/**
 * Where the top-level `"image"` key's string value lies: [start, end) between its quotes. Walks the members
 * before it (strings with escapes, nesting) so a nested or quoted "image" is never taken; the value itself is
 * not walked (indexOf finds its closing quote).
 */
function locateImage(b: Buffer, from: number): { start: number; end: number } | undefined {
  let depth = 0;
  let i = from;
  for (; i < b.length; i++) {
    const c = b[i]!;
    if (c === QUOTE) {
      if (depth === 1 && i + KEY.length <= b.length && b.compare(KEY, 0, KEY.length, i, i + KEY.length) === 0) {
        let j = i + KEY.length;
        while (isWs(b[j])) j++;
        if (b[j] === 0x3a) {
          j++;
          while (isWs(b[j])) j++;
          if (b[j] !== QUOTE) return undefined;
          const start = j + 1;
          const end = b.indexOf(QUOTE, start);
          if (end < 0) return undefined;
          const esc = b.indexOf(BACKSLASH, start);
          if (esc >= 0 && esc < end) return undefined;
          return { start, end };
        }
      }
      // Skip a string (a key or a value): it ends at the first quote not escaped. indexOf, not a loop over the
      // bytes: a batch's 4 MB of base64 strings took the event loop ~4 ms per body byte by byte (bench/redteam).
      let q = b.indexOf(QUOTE, i + 1);
      while (q > 0 && escapedAt(b, q)) q = b.indexOf(QUOTE, q + 1);
      i = q < 0 ? b.length : q;
      continue;
    }
    if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) depth--;
    if (depth < 1 && i > from) return undefined;
  }
  return undefined;
}

/**
 * The parsed body with `image` taken out, and the image's bytes; undefined when the body is not the plain
 * case (the caller parses it whole). Throws nothing: a body that is not valid JSON is left to the full parse,
 * which words the error.
 */
export function extractJsonImage(body: Buffer, maxImageBytes: number): { fields: Record<string, unknown>; image: Buffer } | undefined {
  const from = textStart(body);
  if (body[from] !== 0x7b) return undefined;
  const at = locateImage(body, from);
  if (!at) return undefined;
  const { start, end } = at;
  const len = end - start;
  if (len === 0 || len % 4 !== 0 || (len / 4) * 3 > maxImageBytes + 2) return undefined;
  if (body.indexOf(KEY, end) >= 0) return undefined; // a second "image" anywhere: the full parse decides
  const image = decodeStandardBase64(body, start, end);
  if (!image || image.length === 0 || image.length > maxImageBytes) return undefined;
  // The full parse refuses a body that is not UTF-8 (422); toString would put U+FFFD in its place instead.
  if (!isUtf8(body.subarray(from, start)) || !isUtf8(body.subarray(end))) return undefined;
  let fields: unknown;
  try {
    fields = JSON.parse(body.toString('utf8', from, start) + body.toString('utf8', end));
  } catch {
    return undefined;
  }
  if (typeof fields !== 'object' || fields === null || Array.isArray(fields) || (fields as Record<string, unknown>).image !== '') return undefined;
  return { fields: fields as Record<string, unknown>, image };
}

/**
 * The bytes of b[start, end) when that text is standard base64 (A-Z a-z 0-9 + /, then at most two '='; a
 * length that is a multiple of 4), else undefined: exactly the bytes decodeBase64Image gives for the same
 * string, which accepts that text and nothing else of this shape. Node's decoder also reads the URL-safe '-'
 * and '_' (refused here by a scan), stops at the first '=' (any '=' before the padding: refused by a scan)
 * and skips every other character; a skipped character leaves fewer than len - pad characters to decode, so
 * fewer bytes than (len / 4) * 3 - pad come out, and the count refuses it.
 */
function decodeStandardBase64(b: Buffer, start: number, end: number): Buffer | undefined {
  const len = end - start;
  let pad = 0;
  if (b[end - 1] === EQUALS) pad++;
  if (pad === 1 && b[end - 2] === EQUALS) pad++;
  const text = b.subarray(start, end - pad);
  if (text.indexOf(EQUALS) >= 0 || text.indexOf(0x2d) >= 0 || text.indexOf(0x5f) >= 0) return undefined;
  const n = (len / 4) * 3 - pad;
  const out = Buffer.allocUnsafe(n);
  let written = 0;
  for (let i = start; i < end; i += CHUNK) written += out.write(b.toString('latin1', i, Math.min(end, i + CHUNK)), written, 'base64');
  return written === n ? out : undefined;
}

const IMAGES_KEY = Buffer.from('"images"');

/**
 * How many items a plain batch body's top-level `images` array has — `{"images": ["…", …], …}` with only
 * strings in the array, no top-level "image" or "image_url" and no top-level key with an escape — without parsing it; undefined for any other
 * body (the caller parses it whole). The strings are skipped with indexOf, so a 4 MB batch costs ~0.1 ms
 * where its JSON.parse and string copy cost several (bench/redteam: the red team's batches of 16, each refused
 * for want of room in the queue, were 3 s of the main thread in 15 s).
 */
export function countBatchImages(b: Buffer): number | undefined {
  let i = textStart(b);
  if (b[i] !== 0x7b) return undefined;
  let depth = 0;
  let count: number | undefined;
  let inImages = false;
  const endOfString = (at: number) => {
    let q = b.indexOf(QUOTE, at + 1);
    while (q > 0 && escapedAt(b, q)) q = b.indexOf(QUOTE, q + 1);
    return q;
  };
  for (; i < b.length; i++) {
    const c = b[i]!;
    if (c === QUOTE) {
      const end = endOfString(i);
      if (end < 0) return undefined;
      if (inImages) {
        count!++;
      } else if (depth === 1) {
        const key = b.subarray(i, end + 1);
        let j = end + 1;
        while (isWs(b[j])) j++;
        if (b[j] === 0x3a) {
          // A key with an escape may spell any key ("\u0069mages" is "images"): the full parse decides.
          if (key.includes(BACKSLASH)) return undefined;
          // A key: "image" or "image_url" beside "images" is the full parse's to answer.
          if (key.equals(KEY) || key.equals(Buffer.from('"image_url"'))) return undefined;
          if (key.equals(IMAGES_KEY)) {
            if (count !== undefined) return undefined; // twice: JSON.parse takes the last
            j++;
            while (isWs(b[j])) j++;
            if (b[j] !== 0x5b) return undefined;
            count = 0;
            inImages = true;
            depth++;
            i = j;
            continue;
          }
        }
      }
      i = end;
      continue;
    }
    if (inImages) {
      if (c === 0x5d) (inImages = false), depth--;
      else if (c !== 0x2c && !isWs(c)) return undefined; // a non-string item
      continue;
    }
    if (c === 0x7b || c === 0x5b) depth++;
    else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (depth === 0) {
        for (let k = i + 1; k < b.length; k++) if (!isWs(b[k])) return undefined; // trailing bytes
        return count;
      }
    }
  }
  return undefined;
}
