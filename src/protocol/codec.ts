// The sidecar protocol (contract: sidecar/PROTOCOL.md). A frame is a u32 little-endian payload length
// followed by exactly one MessagePack map; lengths 0 and over 64 MiB, invalid MessagePack, trailing bytes
// and a map without a valid id are E_FRAME (the connection closes); unknown ops are E_UNKNOWN_OP and
// missing/unknown/mistyped fields E_FIELD. Encoders write keys in the canonical order so that this module
// and the C++ codec produce identical bytes (checked by the golden frames in test/fixtures/frames).
// Floats travel as raw little-endian f32 `bin` blocks. Wire (snake_case) shapes never leave src/protocol
// and src/sidecar.
import { Packr } from 'msgpackr';
import os from 'node:os';
import { isWireErrorCode, type WireErrorCode } from './error-codes.ts';

export const PROTOCOL_VERSION = 1;
export const MAX_FRAME_BYTES = 64 * 1024 * 1024;
export const FRAME_HEADER_BYTES = 4;
const MAX_ID = 0xffffffff;

if (os.endianness() !== 'LE') {
  throw new Error('src/protocol: f32 tensors travel little-endian and are viewed in place; this host is big-endian');
}

// useRecords:false → plain MessagePack maps a C++ decoder can read; variableMapSize → fixmap for small maps
// (msgpackr otherwise always writes map16, which is valid but not the canonical encoding).
const packr = new Packr({ useRecords: false, variableMapSize: true, mapsAsObjects: true });

export type WireOp = 'hello' | 'infer' | 'ping' | 'shutdown';
const REQUEST_OPS: ReadonlySet<string> = new Set(['infer', 'ping', 'shutdown']);

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
}
export interface WireRequest {
  kind: 'request';
  id: number;
  op: 'infer' | 'ping' | 'shutdown';
  pixel_values?: Uint8Array;
}
export interface WireOkReply {
  kind: 'reply';
  id: number;
  ok: true;
  logits?: Uint8Array;
  pred_boxes?: Uint8Array;
  forward_ms?: number;
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
  'num_classes', 'labels', 'pixel_values', 'logits', 'pred_boxes', 'forward_ms', 'error',
] as const;
const HELLO_FIELDS = FIELD_ORDER.slice(0, 10);
const KNOWN: ReadonlySet<string> = new Set(['id', ...FIELD_ORDER]);

/** One frame: length header + canonical payload. */
export function encodeFrame(msg: WireMessage): Buffer {
  const src: Record<string, unknown> = { ...msg };
  if (msg.kind === 'hello') {
    src.op = 'hello';
    src.ok = true;
  }
  const ordered: Record<string, unknown> = { id: msg.id };
  for (const key of FIELD_ORDER) {
    const v = src[key];
    if (v === undefined) continue;
    const e = v as { code: string; message: string };
    ordered[key] = key === 'error' ? { code: e.code, message: e.message } : v;
  }
  const payload = packr.pack(ordered);
  if (payload.length > MAX_FRAME_BYTES) {
    throw new RangeError(`encodeFrame: payload is ${payload.length} bytes, over the ${MAX_FRAME_BYTES}-byte cap`);
  }
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length);
  frame.writeUInt32LE(payload.length, 0);
  payload.copy(frame, FRAME_HEADER_BYTES);
  return frame;
}

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
    if (m.op !== 'hello' && !REQUEST_OPS.has(m.op)) return opErr(`unknown op '${m.op}'; expected one of infer, ping, shutdown`);
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
      case 'sidecar_version': case 'engine': case 'device':
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
      case 'forward_ms':
        if (typeof v !== 'number') return want('a number');
        if (!(v >= 0)) return fieldErr("field 'forward_ms' must be a non-negative number");
        break;
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
      if (!HELLO_FIELDS.every(present) || Object.keys(m).length !== HELLO_FIELDS.length + 1) {
        return fieldErr('hello must carry exactly the fields in PROTOCOL.md');
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
    const inferKeys = ['logits', 'pred_boxes', 'forward_ms'];
    if (payloadKeys.length !== 0 && !(payloadKeys.length === 3 && inferKeys.every(present))) {
      return fieldErr('an ok reply carries either nothing or exactly logits, pred_boxes and forward_ms');
    }
    const reply: WireOkReply = { kind: 'reply', id, ok: true };
    if (payloadKeys.length) {
      reply.logits = m.logits as Uint8Array;
      reply.pred_boxes = m.pred_boxes as Uint8Array;
      reply.forward_ms = m.forward_ms as number;
    }
    return { ok: true, message: reply };
  }

  if (op === undefined) return opErr("request has no 'op'; expected one of infer, ping, shutdown");
  if (op === 'hello') return opErr("'hello' is sent by the sidecar, not requested");
  if (id === 0) return frameErr('request id 0 is reserved for the hello; use 1 to 4294967295');
  const allowed = op === 'infer' ? ['pixel_values'] : [];
  for (const key of FIELD_ORDER) {
    if (present(key) && key !== 'op' && !allowed.includes(key)) {
      return fieldErr(`field '${key}' is not part of a '${op}' request`);
    }
  }
  if (op === 'infer' && !present('pixel_values')) {
    return fieldErr("infer request has no 'pixel_values'; expected f32 [3,560,560] as binary");
  }
  const req: WireRequest = { kind: 'request', id, op };
  if (op === 'infer') req.pixel_values = m.pixel_values as Uint8Array;
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
