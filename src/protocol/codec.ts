// The sidecar protocol (contract: sidecar/PROTOCOL.md). A frame is a u32 little-endian payload length
// followed by exactly one MessagePack map; lengths 0 and over the cap, invalid MessagePack, trailing bytes
// and a map without a valid id are E_FRAME (the connection closes); unknown ops are E_UNKNOWN_OP and
// missing/unknown/mistyped fields E_FIELD. Encoders write keys in the canonical order so that this module
// and the C++ codec produce identical bytes (checked by the golden frames in test/fixtures/frames).
// Floats travel as raw little-endian f32 `bin` blocks. Wire (snake_case) shapes never leave src/protocol
// and src/sidecar.
import { Packr } from 'msgpackr';
import os from 'node:os';
import { isWireErrorCode, type WireErrorCode } from './error-codes.ts';

/** This client's protocol version: 3 added the hello's `variant`. */
export const PROTOCOL_VERSION = 3;
/** The older version this client also speaks: its hello has no `variant` (PROTOCOL.md, "Versions"). */
export const PROTOCOL_VERSION_WITHOUT_VARIANT = 2;
import { MAX_IMAGE_SIDE } from '../image/limits.ts';

/** Largest image side an `infer` image may have: the decoder's own limit. */
export { MAX_IMAGE_SIDE };
/** The frame cap follows the image limits: an 8192×8192 RGB u8 image plus 64 KiB for the envelope. */
export const MAX_FRAME_BYTES = MAX_IMAGE_SIDE * MAX_IMAGE_SIDE * 3 + 65536;
export const FRAME_HEADER_BYTES = 4;
const MAX_ID = 0xffffffff;

if (os.endianness() !== 'LE') {
  throw new Error('src/protocol: f32 tensors travel little-endian and are viewed in place; this host is big-endian');
}

// useRecords:false → plain MessagePack maps a C++ decoder can read; variableMapSize → fixmap for small maps
// (msgpackr otherwise always writes map16, which is valid but not the canonical encoding).
const packr = new Packr({ useRecords: false, variableMapSize: true, mapsAsObjects: true });

export type WireOp = 'hello' | 'infer' | 'ping' | 'shutdown' | 'shm_attach' | 'decoders';
const REQUEST_OPS: ReadonlySet<string> = new Set(['infer', 'ping', 'shutdown', 'shm_attach', 'decoders']);
const OPS_TEXT = [...REQUEST_OPS].join(', ');

export interface WireHello {
  kind: 'hello';
  id: 0;
  protocol_version: number;
  sidecar_version: string;
  engine: string;
  device: string;
  input_shape: number[];
  num_queries: number;
  num_classes: number;
  labels: string[];
  /** The loaded checkpoint's variant ("base", "nano", …, "large_deprecated"); absent in a version-2 hello. */
  variant?: string;
}
/** A decoded image as it travels: RGB u8, HWC, row-major, exactly width·height·3 bytes. */
export interface WireImage {
  width: number;
  height: number;
  rgb: Uint8Array;
}
/** A decoded image left in one of the connection's slot files: `length` = width·height·3 bytes at `offset`. */
export interface WireImageShm {
  name: string;
  offset: number;
  length: number;
  width: number;
  height: number;
}
/**
 * An image file for the sidecar to decode (PROTOCOL.md, "Images the sidecar decodes"): `format` "jpeg" or
 * "png", `width` and `height` the client's reading of its header, `bytes` the whole file.
 */
export interface WireImageEncoded {
  format: string;
  width: number;
  height: number;
  bytes: Uint8Array;
}
/** The shm_attach reply: the connection's slot files (absolute paths) and the bytes each can hold. */
export interface WireShm {
  paths: string[];
  slot_bytes: number;
}
export interface WireRequest {
  kind: 'request';
  id: number;
  op: 'infer' | 'ping' | 'shutdown' | 'shm_attach' | 'decoders';
  /** infer carries exactly one of image, pixel_values, image_shm and image_encoded. */
  image?: WireImage;
  pixel_values?: Uint8Array;
  image_shm?: WireImageShm;
  image_encoded?: WireImageEncoded;
}
export interface WireOkReply {
  kind: 'reply';
  id: number;
  ok: true;
  logits?: Uint8Array;
  pred_boxes?: Uint8Array;
  /** The sidecar's decode time: only in the reply to an image_encoded infer. */
  decode_ms?: number;
  preprocess_ms?: number;
  forward_ms?: number;
  shm?: WireShm;
  /** The decoders reply: the encoded formats this sidecar decodes. */
  decoders?: string[];
}
export interface WireErrorReply {
  kind: 'error';
  id: number;
  ok: false;
  error: { code: WireErrorCode; message: string };
}
export type WireMessage = WireHello | WireRequest | WireOkReply | WireErrorReply;

export type DecodeResult =
  | { ok: true; message: WireMessage }
  | { ok: false; code: WireErrorCode; message: string; id: number };

// Canonical key order after "id" (same list as k_field_names in sidecar/src/protocol/protocol.cpp).
const FIELD_ORDER = [
  'op', 'ok', 'protocol_version', 'sidecar_version', 'engine', 'device', 'input_shape', 'num_queries',
  'num_classes', 'labels', 'variant', 'image', 'pixel_values', 'image_shm', 'image_encoded', 'logits', 'pred_boxes', 'decode_ms',
  'preprocess_ms', 'forward_ms', 'shm', 'decoders', 'error',
] as const;
const IMAGE_FIELDS = ['width', 'height', 'rgb'] as const;
const IMAGE_SHM_FIELDS = ['name', 'offset', 'length', 'width', 'height'] as const;
const IMAGE_ENCODED_FIELDS = ['format', 'width', 'height', 'bytes'] as const;
const INFER_INPUTS = ['image', 'pixel_values', 'image_shm', 'image_encoded'] as const;
const INFER_REPLY_FIELDS = ['logits', 'pred_boxes', 'preprocess_ms', 'forward_ms'] as const;
const HELLO_FIELDS = FIELD_ORDER.slice(0, 11);
const HELLO_FIELDS_V2 = HELLO_FIELDS.filter((k) => k !== 'variant');
const KNOWN: ReadonlySet<string> = new Set(['id', ...FIELD_ORDER]);

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
    } else {
      ordered[key] = v;
    }
  }
  return ordered;
}

function frameHeader(payloadBytes: number): Buffer {
  if (payloadBytes > MAX_FRAME_BYTES) {
    throw new RangeError(`encodeFrame: payload is ${payloadBytes} bytes, over the ${MAX_FRAME_BYTES}-byte cap`);
  }
  const h = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  h.writeUInt32LE(payloadBytes, 0);
  return h;
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
 * image, tensor or file: that binary is the last value of the map (canonical key order puts `image.rgb`,
 * `pixel_values` and `image_encoded.bytes` last), so the envelope is packed with an empty binary, its `c4 00` is cut, and the real
 * bin header and the caller's bytes follow. A 4000×3000 photo is 36 MB: one copy less per request.
 */
export function encodeFrameParts(msg: WireMessage): Buffer[] {
  if (msg.kind === 'request' && msg.op === 'infer' && msg.image_shm && !msg.image && !msg.pixel_values) {
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
  const packed = packr.pack(ordered);
  if (!big) return [Buffer.concat([frameHeader(packed.length), packed])];
  if (packed[packed.length - 2] !== 0xc4 || packed[packed.length - 1] !== 0) {
    throw new Error('encodeFrameParts: the empty placeholder binary is not the last value of the map');
  }
  const envelope = packed.subarray(0, packed.length - 2); // drop the empty binary's c4 00
  const bh = binHeader(big.length);
  const total = envelope.length + bh.length + big.length;
  const head = Buffer.concat([frameHeader(total), envelope, bh]);
  return [head, Buffer.from(big.buffer, big.byteOffset, big.byteLength)];
}
const EMPTY = new Uint8Array(0);

/**
 * An infer request by shared-memory reference, {id, op: 'infer', image_shm: {name, offset, length, width,
 * height}}, written byte by byte: the same canonical bytes as packr gives (test/protocol/codec.test.ts compares
 * them), without canonical()'s copies and packr's general path. Traced in a server between requests ~15 ms
 * apart (RESULTS.md §11), the generic encode took ~110 µs p50 of cold code for these ~80 bytes. Undefined for
 * what this writer does not cover (a name that is not short ASCII, a number that is not a u32): the caller
 * then packs the message the general way.
 */
function shmInferFrame(id: number, r: WireImageShm): Buffer | undefined {
  const name = r.name;
  if (typeof name !== 'string' || name.length > 31 || !/^[\x20-\x7e]*$/.test(name)) return undefined;
  const nums = [id, r.offset, r.length, r.width, r.height];
  for (const v of nums) if (!(Number.isInteger(v) && v >= 0 && v <= 0xffffffff)) return undefined;
  const out = Buffer.allocUnsafe(SHM_INFER_MAX_BYTES);
  let o = FRAME_HEADER_BYTES;
  const raw = (b: Uint8Array) => {
    out.set(b, o);
    o += b.length;
  };
  const uint = (v: number) => {
    if (v < 0x80) out[o++] = v;
    else if (v < 0x100) {
      out[o++] = 0xcc;
      out[o++] = v;
    } else if (v < 0x10000) {
      out[o++] = 0xcd;
      out.writeUInt16BE(v, o);
      o += 2;
    } else {
      out[o++] = 0xce;
      out.writeUInt32BE(v, o);
      o += 4;
    }
  };
  raw(SHM_INFER_KEYS[0]!); // fixmap 3, "id"
  uint(id);
  raw(SHM_INFER_KEYS[1]!); // "op" "infer" "image_shm" fixmap 5 "name"
  out[o++] = 0xa0 | name.length;
  o += out.write(name, o, 'latin1');
  raw(SHM_INFER_KEYS[2]!); // "offset"
  uint(r.offset);
  raw(SHM_INFER_KEYS[3]!); // "length"
  uint(r.length);
  raw(SHM_INFER_KEYS[4]!); // "width"
  uint(r.width);
  raw(SHM_INFER_KEYS[5]!); // "height"
  uint(r.height);
  out.writeUInt32LE(o - FRAME_HEADER_BYTES, 0);
  return out.subarray(0, o);
}
const fixstr = (s: string) => [0xa0 | s.length, ...Buffer.from(s, 'latin1')];
const SHM_INFER_KEYS = [
  [0x83, ...fixstr('id')],
  [...fixstr('op'), ...fixstr('infer'), ...fixstr('image_shm'), 0x85, ...fixstr('name')],
  fixstr('offset'),
  fixstr('length'),
  fixstr('width'),
  fixstr('height'),
].map((a) => Uint8Array.from(a));
const SHM_INFER_MAX_BYTES = FRAME_HEADER_BYTES + SHM_INFER_KEYS.reduce((n, k) => n + k.length, 0) + 1 + 31 + 5 * 5;

/** Views the bytes of an f32 array for a `bin` field (no copy). */
export function f32Bytes(a: Float32Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** Copies a `bin` field into a fresh, aligned Float32Array (a view into a frame may be misaligned). */
export function f32FromBytes(b: Uint8Array): Float32Array {
  const out = new Float32Array(b.byteLength / 4);
  new Uint8Array(out.buffer).set(b);
  return out;
}

/**
 * An infer reply in the canonical shape the sidecar writes, {id, ok: true, logits, pred_boxes, [decode_ms,]
 * preprocess_ms, forward_ms} (decode_ms only after an image_encoded request), read byte by byte: the same message decodePayload's general path gives (the binaries are views
 * into the payload; test/protocol/codec.test.ts compares both ways). Traced in the client between requests
 * ~10 ms apart, the general path took ~130 µs p50 of cold code for this 114 KB reply (RESULTS.md §11).
 * Undefined for anything else, valid or not (other keys or key order, a uint64, a negative or NaN time,
 * trailing bytes): the general path then decodes it and names what is wrong. Exported for its test only.
 */
export function inferReplyAt(p: Uint8Array): WireOkReply | undefined {
  const n = p.length;
  let o = 0;
  const key = (k: Uint8Array): boolean => {
    if (o + k.length > n) return false;
    for (let i = 0; i < k.length; i++) if (p[o + i] !== k[i]) return false;
    o += k.length;
    return true;
  };
  const dv = new DataView(p.buffer, p.byteOffset, n);
  const uint = (): number => {
    if (o >= n) return -1;
    const t = p[o]!;
    if (t < 0x80) return (o++, t);
    const w = t === 0xcc ? 1 : t === 0xcd ? 2 : t === 0xce ? 4 : 0;
    if (w === 0 || o + 1 + w > n) return -1;
    const v = w === 1 ? p[o + 1]! : w === 2 ? dv.getUint16(o + 1) : dv.getUint32(o + 1);
    o += 1 + w;
    return v;
  };
  const ms = (): number => {
    if (o >= n) return -1;
    const t = p[o]!;
    if (t === 0xcb || t === 0xca) {
      const w = t === 0xcb ? 8 : 4;
      if (o + 1 + w > n) return -1;
      const v = w === 8 ? dv.getFloat64(o + 1) : dv.getFloat32(o + 1);
      o += 1 + w;
      return v >= 0 ? v : -1;
    }
    return uint();
  };
  const bin = (): Uint8Array | undefined => {
    if (o >= n) return undefined;
    const t = p[o]!;
    const w = t === 0xc4 ? 1 : t === 0xc5 ? 2 : t === 0xc6 ? 4 : 0;
    if (w === 0 || o + 1 + w > n) return undefined;
    const len = w === 1 ? p[o + 1]! : w === 2 ? dv.getUint16(o + 1) : dv.getUint32(o + 1);
    const start = o + 1 + w;
    if (len % 4 !== 0 || start + len > n) return undefined;
    o = start + len;
    return p.subarray(start, o);
  };
  // fixmap 6, or 7 with decode_ms
  const withDecode = n > 0 && p[0] === 0x87;
  if (n === 0 || (p[0] !== 0x86 && !withDecode)) return undefined;
  o = 1;
  if (!key(REPLY_KEYS[0]!)) return undefined; // "id"
  const id = uint();
  if (id < 0 || !key(REPLY_KEYS[1]!)) return undefined; // "ok" true "logits"
  const logits = bin();
  if (!logits || !key(REPLY_KEYS[2]!)) return undefined; // "pred_boxes"
  const pred_boxes = bin();
  if (!pred_boxes) return undefined;
  let decode_ms = 0;
  if (withDecode) {
    if (!key(REPLY_KEYS[5]!)) return undefined; // "decode_ms"
    decode_ms = ms();
    if (decode_ms < 0) return undefined;
  }
  if (!key(REPLY_KEYS[3]!)) return undefined; // "preprocess_ms"
  const preprocess_ms = ms();
  if (preprocess_ms < 0 || !key(REPLY_KEYS[4]!)) return undefined; // "forward_ms"
  const forward_ms = ms();
  if (forward_ms < 0 || o !== n) return undefined;
  return withDecode
    ? { kind: 'reply', id, ok: true, logits, pred_boxes, decode_ms, preprocess_ms, forward_ms }
    : { kind: 'reply', id, ok: true, logits, pred_boxes, preprocess_ms, forward_ms };
}
const REPLY_KEYS = [
  fixstr('id'),
  [...fixstr('ok'), 0xc3, ...fixstr('logits')],
  fixstr('pred_boxes'),
  fixstr('preprocess_ms'),
  fixstr('forward_ms'),
  fixstr('decode_ms'),
].map((a) => Uint8Array.from(a));

/**
 * What is wrong with `v` as the map field `key` whose keys are exactly `fields` (the infer inputs image,
 * image_shm and image_encoded): not a map, an unknown key, or a missing one; undefined when its keys are right
 * (the values' types are the caller's to check).
 */
function keyedMapError(key: string, v: unknown, fields: readonly string[]): string | undefined {
  const list = fields.join(', ');
  if (v === null || typeof v !== 'object' || Array.isArray(v) || v instanceof Uint8Array) return `field '${key}' must be a map {${list}}, got ${typeName(v)}`;
  const extra = Object.keys(v).find((k) => !fields.includes(k));
  if (extra !== undefined) return `field '${key}' has an unknown key '${extra}'; expected ${list}`;
  const missing = fields.find((k) => !Object.hasOwn(v, k));
  return missing === undefined ? undefined : `field '${key}' lacks '${missing}'; expected ${list}`;
}

function typeName(v: unknown): string {
  if (v === null) return 'nil';
  if (v instanceof Uint8Array) return 'binary';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? (v < 0 ? 'negative integer' : 'unsigned integer') : 'float';
  if (typeof v === 'object') return 'map';
  return typeof v;
}

const isUint = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/** Decodes one payload (the bytes after the length header). Binary fields are views into `payload`. */
export function decodePayload(payload: Uint8Array): DecodeResult {
  const fast = inferReplyAt(payload);
  if (fast) return { ok: true, message: fast };
  const frameErr = (message: string): DecodeResult => ({ ok: false, code: 'E_FRAME', message, id: 0 });
  if (payload.length === 0 || payload.length > MAX_FRAME_BYTES) {
    return frameErr(`payload is ${payload.length} bytes; expected 1 to ${MAX_FRAME_BYTES}`);
  }
  let root: unknown;
  try {
    // unpack() throws on trailing bytes ("Data read, but end of buffer not reached"); E_FRAME either way.
    root = packr.unpack(payload);
  } catch (e) {
    return frameErr(`payload is not valid MessagePack (or has trailing bytes): ${(e as Error).message}`);
  }
  if (root === null || typeof root !== 'object' || Array.isArray(root) || root instanceof Uint8Array || root instanceof Map) {
    return frameErr(`message must be a map, got ${typeName(root)}`);
  }
  const m = root as Record<string, unknown>;
  const id = m.id;
  if (id === undefined) return frameErr("message has no 'id'; expected an unsigned integer");
  if (!isUint(id) || id > MAX_ID) return frameErr(`'id' must be an unsigned integer up to ${MAX_ID}`);
  const fieldErr = (message: string): DecodeResult => ({ ok: false, code: 'E_FIELD', message, id });
  const opErr = (message: string): DecodeResult => ({ ok: false, code: 'E_UNKNOWN_OP', message, id });

  let op: WireOp | undefined;
  if (Object.hasOwn(m, 'op')) {
    if (typeof m.op !== 'string') return opErr(`'op' must be a string, got ${typeName(m.op)}`);
    if (m.op !== 'hello' && !REQUEST_OPS.has(m.op)) return opErr(`unknown op '${m.op}'; expected one of ${OPS_TEXT}`);
    op = m.op as WireOp;
  }
  for (const key of Object.keys(m)) {
    if (!KNOWN.has(key)) return fieldErr(`unknown field '${key}'`);
    const v = m[key];
    const want = (what: string) => fieldErr(`field '${key}' must be ${what}, got ${typeName(v)}`);
    switch (key) {
      case 'ok':
        if (typeof v !== 'boolean') return want('a boolean');
        break;
      case 'protocol_version': case 'num_queries': case 'num_classes':
        if (!isUint(v)) return want('an unsigned integer');
        break;
      case 'sidecar_version': case 'engine': case 'device': case 'variant':
        if (typeof v !== 'string') return want('a string');
        break;
      case 'input_shape':
        if (!Array.isArray(v) || v.length !== 3 || !v.every(isUint)) return want('an array of 3 unsigned integers');
        break;
      case 'labels':
        if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) return want('an array of strings');
        break;
      case 'pixel_values': case 'logits': case 'pred_boxes':
        if (!(v instanceof Uint8Array)) return want('binary (f32 little-endian)');
        if (v.length % 4 !== 0) return fieldErr(`field '${key}' must hold whole f32 values, got ${v.length} bytes`);
        break;
      case 'forward_ms': case 'preprocess_ms': case 'decode_ms':
        if (typeof v !== 'number') return want('a number');
        if (!(v >= 0)) return fieldErr(`field '${key}' must be a non-negative number`);
        break;
      case 'image': {
        const bad = keyedMapError(key, v, IMAGE_FIELDS);
        if (bad !== undefined) return fieldErr(bad);
        const im = v as Record<string, unknown>;
        if (!isUint(im.width)) return fieldErr(`field 'image.width' must be an unsigned integer, got ${typeName(im.width)}`);
        if (!isUint(im.height)) return fieldErr(`field 'image.height' must be an unsigned integer, got ${typeName(im.height)}`);
        if (!(im.rgb instanceof Uint8Array)) return fieldErr(`field 'image.rgb' must be binary (RGB u8 HWC), got ${typeName(im.rgb)}`);
        break;
      }
      case 'image_shm': {
        const bad = keyedMapError(key, v, IMAGE_SHM_FIELDS);
        if (bad !== undefined) return fieldErr(bad);
        const r = v as Record<string, unknown>;
        if (typeof r.name !== 'string') return fieldErr(`field 'image_shm.name' must be a string (a slot file's name), got ${typeName(r.name)}`);
        for (const k of IMAGE_SHM_FIELDS.slice(1)) {
          if (!isUint(r[k])) return fieldErr(`field 'image_shm.${k}' must be an unsigned integer, got ${typeName(r[k])}`);
        }
        break;
      }
      case 'image_encoded': {
        const bad = keyedMapError(key, v, IMAGE_ENCODED_FIELDS);
        if (bad !== undefined) return fieldErr(bad);
        const r = v as Record<string, unknown>;
        if (typeof r.format !== 'string') return fieldErr(`field 'image_encoded.format' must be a string ("jpeg" or "png"), got ${typeName(r.format)}`);
        if (!isUint(r.width)) return fieldErr(`field 'image_encoded.width' must be an unsigned integer, got ${typeName(r.width)}`);
        if (!isUint(r.height)) return fieldErr(`field 'image_encoded.height' must be an unsigned integer, got ${typeName(r.height)}`);
        if (!(r.bytes instanceof Uint8Array)) return fieldErr(`field 'image_encoded.bytes' must be binary (the image file), got ${typeName(r.bytes)}`);
        break;
      }
      case 'decoders':
        if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) return want('an array of strings');
        break;
      case 'shm': {
        if (v === null || typeof v !== 'object' || Array.isArray(v) || v instanceof Uint8Array) return want('a map {paths, slot_bytes}');
        const r = v as Record<string, unknown>;
        if (Object.keys(r).length !== 2 || !Object.hasOwn(r, 'paths') || !Object.hasOwn(r, 'slot_bytes')) {
          return fieldErr("field 'shm' must carry exactly paths and slot_bytes");
        }
        if (!Array.isArray(r.paths) || !r.paths.every((p) => typeof p === 'string')) return fieldErr("field 'shm.paths' must be an array of strings");
        if (!isUint(r.slot_bytes)) return fieldErr(`field 'shm.slot_bytes' must be an unsigned integer, got ${typeName(r.slot_bytes)}`);
        break;
      }
      case 'error': {
        if (v === null || typeof v !== 'object' || Array.isArray(v) || v instanceof Uint8Array) return want('a map {code, message}');
        const e = v as Record<string, unknown>;
        const keys = Object.keys(e);
        if (keys.some((k) => k !== 'code' && k !== 'message')) return fieldErr(`field 'error' has an unknown key`);
        if (typeof e.code !== 'string') return fieldErr(`field 'error.code' must be a string, got ${typeName(e.code)}`);
        if (!isWireErrorCode(e.code)) return fieldErr(`field 'error.code' is '${e.code}', which is not in the error table`);
        if (typeof e.message !== 'string') return fieldErr(`field 'error.message' must be a string, got ${typeName(e.message)}`);
        break;
      }
    }
  }
  const present = (k: string) => Object.hasOwn(m, k);
  const payloadKeys = Object.keys(m).filter((k) => k !== 'id' && k !== 'op' && k !== 'ok');

  if (present('ok')) {
    if (op === 'hello') {
      // Version 2 (an older sidecar) has no `variant`; every other version carries it.
      const v2 = m.protocol_version === PROTOCOL_VERSION_WITHOUT_VARIANT;
      const want = v2 ? HELLO_FIELDS_V2 : HELLO_FIELDS;
      if (!want.every(present) || Object.keys(m).length !== want.length + 1) {
        return fieldErr(v2 ? "a version-2 hello must carry exactly the version-2 fields in PROTOCOL.md (no 'variant')" : 'hello must carry exactly the fields in PROTOCOL.md');
      }
      const labels = m.labels as string[];
      if (labels.length !== m.num_classes) {
        return fieldErr(`hello has ${labels.length} labels for ${String(m.num_classes)} classes`);
      }
      return { ok: true, message: { kind: 'hello', ...(m as object), id: 0 } as WireHello };
    }
    if (op !== undefined) return fieldErr("a reply carries no 'op' (only the hello does)");
    if (m.ok === false) {
      if (payloadKeys.length !== 1 || payloadKeys[0] !== 'error') return fieldErr("an error reply carries exactly 'error'");
      const e = m.error as { code: WireErrorCode; message: string };
      return { ok: true, message: { kind: 'error', id, ok: false, error: { code: e.code, message: e.message } } };
    }
    const only = (k: string) => payloadKeys.length === 1 && payloadKeys[0] === k;
    const inferKeys = INFER_REPLY_FIELDS.length + (present('decode_ms') ? 1 : 0);
    const isInfer = payloadKeys.length === inferKeys && INFER_REPLY_FIELDS.every(present);
    if (payloadKeys.length !== 0 && !only('shm') && !only('decoders') && !isInfer) {
      return fieldErr(`an ok reply carries nothing, exactly ${INFER_REPLY_FIELDS.join(', ')} (and decode_ms after image_encoded), exactly shm, or exactly decoders`);
    }
    const reply: WireOkReply = { kind: 'reply', id, ok: true };
    if (only('shm')) {
      const r = m.shm as WireShm;
      reply.shm = { paths: r.paths, slot_bytes: r.slot_bytes };
    } else if (only('decoders')) {
      reply.decoders = m.decoders as string[];
    } else if (payloadKeys.length) {
      reply.logits = m.logits as Uint8Array;
      reply.pred_boxes = m.pred_boxes as Uint8Array;
      if (present('decode_ms')) reply.decode_ms = m.decode_ms as number;
      reply.preprocess_ms = m.preprocess_ms as number;
      reply.forward_ms = m.forward_ms as number;
    }
    return { ok: true, message: reply };
  }

  if (op === undefined) return opErr(`request has no 'op'; expected one of ${OPS_TEXT}`);
  if (op === 'hello') return opErr("'hello' is sent by the sidecar, not requested");
  if (id === 0) return frameErr('request id 0 is reserved for the hello; use 1 to 4294967295');
  const allowed: readonly string[] = op === 'infer' ? INFER_INPUTS : [];
  for (const key of FIELD_ORDER) {
    if (present(key) && key !== 'op' && !allowed.includes(key)) {
      return fieldErr(`field '${key}' is not part of a '${op}' request`);
    }
  }
  const given = INFER_INPUTS.filter(present);
  if (op === 'infer' && given.length !== 1) {
    return fieldErr(given.length
      ? `infer request carries ${given.map((k) => `'${k}'`).join(' and ')}; send exactly one`
      : "infer request has none of 'image' (RGB u8 {width, height, rgb}), 'pixel_values' (f32 [3,S,S]), 'image_shm' (a slot reference) and 'image_encoded' (a JPEG or PNG file {format, width, height, bytes}); send exactly one");
  }
  const req: WireRequest = { kind: 'request', id, op };
  if (op === 'infer') {
    if (present('image')) {
      const im = m.image as WireImage;
      req.image = { width: im.width, height: im.height, rgb: im.rgb };
    } else if (present('image_shm')) {
      const r = m.image_shm as WireImageShm;
      req.image_shm = { name: r.name, offset: r.offset, length: r.length, width: r.width, height: r.height };
    } else if (present('image_encoded')) {
      const r = m.image_encoded as WireImageEncoded;
      req.image_encoded = { format: r.format, width: r.width, height: r.height, bytes: r.bytes };
    } else {
      req.pixel_values = m.pixel_values as Uint8Array;
    }
  }
  return { ok: true, message: req };
}

/**
 * Reassembles frames from socket chunks of any size (a frame may arrive a byte at a time or several per
 * chunk). Hands each complete payload to onPayload; a bad length calls onFrameError once and the reader
 * stops (the caller closes the connection).
 */
export class FrameReader {
  #chunks: Buffer[] = [];
  #buffered = 0;
  #need = -1;
  #failed = false;
  readonly #onPayload: (payload: Buffer) => void;
  readonly #onFrameError: (message: string) => void;
  readonly #maxBytes: number;

  constructor(onPayload: (payload: Buffer) => void, onFrameError: (message: string) => void, maxBytes = MAX_FRAME_BYTES) {
    this.#onPayload = onPayload;
    this.#onFrameError = onFrameError;
    this.#maxBytes = maxBytes;
  }

  push(chunk: Buffer): void {
    if (this.#failed) return;
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    for (;;) {
      if (this.#need < 0) {
        if (this.#buffered < FRAME_HEADER_BYTES) return;
        const len = this.#take(FRAME_HEADER_BYTES).readUInt32LE(0);
        if (len === 0 || len > this.#maxBytes) {
          this.#failed = true;
          this.#chunks = [];
          this.#onFrameError(`frame length ${len} is outside 1 to ${this.#maxBytes} bytes`);
          return;
        }
        this.#need = len;
      }
      if (this.#buffered < this.#need) return;
      const payload = this.#take(this.#need);
      this.#need = -1;
      this.#onPayload(payload);
      if (this.#failed) return;
    }
  }

  /** Stops delivering (after a fatal decode error the caller found in a payload). */
  stop(): void {
    this.#failed = true;
    this.#chunks = [];
  }

  #take(n: number): Buffer {
    this.#buffered -= n;
    const first = this.#chunks[0]!;
    if (first.length >= n) {
      const out = first.subarray(0, n);
      if (first.length === n) this.#chunks.shift();
      else this.#chunks[0] = first.subarray(n);
      return out;
    }
    const out = Buffer.allocUnsafe(n);
    let off = 0;
    while (off < n) {
      const c = this.#chunks[0]!;
      const k = Math.min(c.length, n - off);
      c.copy(out, off, 0, k);
      off += k;
      if (k === c.length) this.#chunks.shift();
      else this.#chunks[0] = c.subarray(k);
    }
    return out;
  }
}
