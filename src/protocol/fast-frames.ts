// The two messages of every request written and read byte by byte, beside the general MessagePack path: an
// infer by shared-memory reference (client → sidecar) and the infer reply (sidecar → client). Each yields
// exactly the canonical bytes or message the general path would, and leaves everything else to it.
import { FRAME_HEADER_BYTES } from './framing.ts';
import type { WireImageShm, WireOkReply } from './messages.ts';

/**
 * An infer request by shared-memory reference, {id, op: 'infer', image_shm: {name, offset, length, width,
 * height}}, written byte by byte: the same canonical bytes as packr gives (test/protocol/codec.test.ts compares
 * them), without canonical()'s copies and packr's general path. Traced in a server between requests ~15 ms
 * apart (RESULTS.md §11), the generic encode took ~110 µs p50 of cold code for these ~80 bytes. Undefined for
 * what this writer does not cover (a name that is not short ASCII, a number that is not a u32): the caller
 * then packs the message the general way.
 */
export function shmInferFrame(id: number, r: WireImageShm): Buffer | undefined {
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

/**
 * A version-4 infer reply in the canonical shape the sidecar writes, {id, ok: true, outputs: {name: bin, …},
 * [decode_ms,] preprocess_ms, forward_ms} (decode_ms only after an image_encoded request), read byte by byte:
 * the same message decodePayload's general path gives (the binaries are views into the payload;
 * test/protocol/codec.test.ts compares both ways). Traced in the client between requests ~10 ms apart, the
 * general path took ~130 µs p50 of cold code for this 114 KB reply (RESULTS.md §11). Undefined for anything
 * else, valid or not (other keys or key order, more than 15 outputs, a name that is not short printable
 * ASCII, a uint64, a negative or NaN time, trailing bytes): the general path then decodes it and names what
 * is wrong. Exported for its test only.
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
  // fixmap 5, or 6 with decode_ms
  const withDecode = n > 0 && p[0] === 0x86;
  if (n === 0 || (p[0] !== 0x85 && !withDecode)) return undefined;
  o = 1;
  if (!key(REPLY_KEYS[0]!)) return undefined; // "id"
  const id = uint();
  if (id < 0 || !key(REPLY_KEYS[1]!)) return undefined; // "ok" true "outputs"
  if (o >= n || (p[o]! & 0xf0) !== 0x80) return undefined; // fixmap of the outputs
  const count = p[o++]! & 0x0f;
  const outputs: Record<string, Uint8Array> = {};
  for (let i = 0; i < count; i++) {
    if (o >= n || (p[o]! & 0xe0) !== 0xa0) return undefined; // fixstr name
    const len = p[o]! & 0x1f;
    if (o + 1 + len > n) return undefined;
    let name = '';
    for (let j = o + 1; j < o + 1 + len; j++) {
      const c = p[j]!;
      if (c < 0x20 || c > 0x7e) return undefined;
      name += String.fromCharCode(c);
    }
    o += 1 + len;
    if (name === '__proto__' || Object.hasOwn(outputs, name)) return undefined;
    const b = bin();
    if (!b) return undefined;
    outputs[name] = b;
  }
  let decode_ms = 0;
  if (withDecode) {
    if (!key(REPLY_KEYS[4]!)) return undefined; // "decode_ms"
    decode_ms = ms();
    if (decode_ms < 0) return undefined;
  }
  if (!key(REPLY_KEYS[2]!)) return undefined; // "preprocess_ms"
  const preprocess_ms = ms();
  if (preprocess_ms < 0 || !key(REPLY_KEYS[3]!)) return undefined; // "forward_ms"
  const forward_ms = ms();
  if (forward_ms < 0 || o !== n) return undefined;
  return withDecode
    ? { kind: 'reply', id, ok: true, outputs, decode_ms, preprocess_ms, forward_ms }
    : { kind: 'reply', id, ok: true, outputs, preprocess_ms, forward_ms };
}
const REPLY_KEYS = [
  fixstr('id'),
  [...fixstr('ok'), 0xc3, ...fixstr('outputs')],
  fixstr('preprocess_ms'),
  fixstr('forward_ms'),
  fixstr('decode_ms'),
].map((a) => Uint8Array.from(a));
