// Encoding messages into frames in the canonical form (sidecar/PROTOCOL.md, "Envelope and canonical key
// order"): keys in FIELD_ORDER, the smallest MessagePack form of every value, so that this module and the C++
// codec write identical bytes (the golden frames in test/fixtures/frames hold both to it).
import { Packr } from 'msgpackr';
import { frameHeader } from './framing.ts';
import { shmInferFrame } from './fast-frames.ts';
import { FIELD_ORDER, type WireImage, type WireImageEncoded, type WireImageShm, type WireMessage, type WireOutputSpec, type WireSelect, type WireShm } from './messages.ts';

// useRecords:false → plain MessagePack maps a C++ decoder can read; variableMapSize → fixmap for small maps
// (msgpackr otherwise always writes map16, which is valid but not the canonical encoding).
export const packr = new Packr({ useRecords: false, variableMapSize: true, mapsAsObjects: true });

function canonical(msg: WireMessage): Record<string, unknown> {
  const src: Record<string, unknown> = { ...msg };
  if (msg.kind === 'hello') {
    src.op = 'hello';
    src.ok = true;
  }
  const ordered: Record<string, unknown> = { id: msg.id };
  for (const key of FIELD_ORDER) {
    const v = src[key];
    if (v === undefined) continue;
    if (key === 'error') {
      const e = v as { code: string; message: string };
      ordered[key] = { code: e.code, message: e.message };
    } else if (key === 'image') {
      const im = v as WireImage;
      ordered[key] = { width: im.width, height: im.height, rgb: im.rgb };
    } else if (key === 'image_shm') {
      const r = v as WireImageShm;
      ordered[key] = { name: r.name, offset: r.offset, length: r.length, width: r.width, height: r.height };
    } else if (key === 'image_encoded') {
      const r = v as WireImageEncoded;
      ordered[key] = { format: r.format, width: r.width, height: r.height, bytes: r.bytes };
    } else if (key === 'shm') {
      const r = v as WireShm;
      ordered[key] = { paths: r.paths, slot_bytes: r.slot_bytes };
    } else if (key === 'outputs' && msg.kind === 'hello') {
      ordered[key] = (v as WireOutputSpec[]).map((o) => (o.rows === undefined
        ? { name: o.name, dtype: o.dtype, shape: o.shape }
        : { name: o.name, dtype: o.dtype, shape: o.shape, rows: o.rows }));
    } else if (key === 'outputs') {
      ordered[key] = { ...(v as Record<string, Uint8Array>) };
    } else if (key === 'select') {
      const r = v as WireSelect;
      ordered[key] = {
        threshold: r.threshold,
        max: r.max,
        ...(r.classes === undefined ? {} : { classes: r.classes }),
        ...(r.class_thresholds === undefined ? {} : { class_thresholds: { ...r.class_thresholds } }),
      };
    } else {
      ordered[key] = v;
    }
  }
  return ordered;
}

/** One frame: length header + canonical payload, in one buffer. */
export function encodeFrame(msg: WireMessage): Buffer {
  const parts = encodeFrameParts(msg);
  return parts.length === 1 ? parts[0]! : Buffer.concat(parts);
}

/** MessagePack's bin header for n bytes (bin8/bin16/bin32, the smallest that fits). */
function binHeader(n: number): Buffer {
  if (n < 0x100) return Buffer.from([0xc4, n]);
  if (n < 0x10000) return Buffer.from([0xc5, n >> 8, n & 0xff]);
  const b = Buffer.allocUnsafe(5);
  b[0] = 0xc6;
  b.writeUInt32BE(n, 1);
  return b;
}

/**
 * The same bytes as encodeFrame, as a list of chunks to write in order, without copying an infer request's
 * image, tensor or file: that binary is the last value of the map but for an optional `select` (canonical key
 * order puts `image.rgb`, `pixel_values` and `image_encoded.bytes` last among the rest), so the envelope is
 * packed with an empty binary, its `c4 00` is cut out, and the real bin header and the caller's bytes go in
 * its place. A 4000×3000 photo is 36 MB: one copy less per request.
 */
export function encodeFrameParts(msg: WireMessage): Buffer[] {
  if (msg.kind === 'request' && msg.op === 'infer' && msg.image_shm && !msg.image && !msg.pixel_values && !msg.select) {
    const f = shmInferFrame(msg.id, msg.image_shm);
    if (f) return [f];
  }
  const ordered = canonical(msg);
  let big: Uint8Array | undefined;
  if (msg.kind === 'request' && msg.op === 'infer') {
    if (msg.image) {
      big = msg.image.rgb;
      ordered.image = { ...(ordered.image as object), rgb: EMPTY };
    } else if (msg.pixel_values) {
      big = msg.pixel_values;
      ordered.pixel_values = EMPTY;
    } else if (msg.image_encoded) {
      big = msg.image_encoded.bytes;
      ordered.image_encoded = { ...(ordered.image_encoded as object), bytes: EMPTY };
    }
  }
  // What follows the placeholder: the `select` key and value (packed alone as a one-key map, header cut;
  // copied, since packr may reuse its buffer for the next pack).
  const tail = big && ordered.select !== undefined ? Buffer.from(packr.pack({ select: ordered.select }).subarray(1)) : EMPTY_BUFFER;
  const packed = packr.pack(ordered);
  if (!big) return [Buffer.concat([frameHeader(packed.length), packed])];
  const at = packed.length - tail.length - 2;
  if (packed[at] !== 0xc4 || packed[at + 1] !== 0 || !packed.subarray(at + 2).equals(tail)) {
    throw new Error('encodeFrameParts: the empty placeholder binary is not the last value of the map before select');
  }
  const envelope = packed.subarray(0, at); // without the empty binary's c4 00
  const bh = binHeader(big.length);
  const total = envelope.length + bh.length + big.length + tail.length;
  const head = Buffer.concat([frameHeader(total), envelope, bh]);
  const body = Buffer.from(big.buffer, big.byteOffset, big.byteLength);
  return tail.length ? [head, body, tail] : [head, body];
}
const EMPTY_BUFFER = Buffer.alloc(0);
const EMPTY = new Uint8Array(0);

/** Views the bytes of an f32 array for a `bin` field (no copy). */
export function f32Bytes(a: Float32Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

