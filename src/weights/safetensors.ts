// Reads and writes the safetensors container: an 8-byte LE header length, a JSON header, raw tensor bytes.
// The reader validates what a loader relies on (dtypes, shapes, offsets inside the data, no overlaps,
// size) and names the file in every error.
import fs from 'node:fs';

export type SafetensorsDtype = 'F32' | 'I64' | 'F16' | 'BF16' | 'I32' | 'U8' | 'F64';

const DTYPE_BYTES: Record<SafetensorsDtype, number> = { F32: 4, I64: 8, F16: 2, BF16: 2, I32: 4, U8: 1, F64: 8 };
const MAX_HEADER_BYTES = 100 * 1024 * 1024;

export interface TensorEntry {
  name: string;
  dtype: SafetensorsDtype;
  shape: number[];
  /** Byte offsets relative to the start of the data section. */
  begin: number;
  end: number;
}

export interface SafetensorsHeader {
  /** Size of the header JSON in bytes (without the 8-byte length prefix). */
  headerBytes: number;
  /** Absolute offset of the data section in the file. */
  dataOffset: number;
  tensors: Map<string, TensorEntry>;
  metadata: Record<string, string>;
}

export class SafetensorsError extends Error {
  override name = 'SafetensorsError';
}

function fail(file: string, what: string): never {
  throw new SafetensorsError(`${file}: not a valid safetensors file: ${what}`);
}

/** Parses and validates the header; `fileSize` is the whole file's size. */
/** Elements in a tensor of `shape` (1 for a scalar's []). */
export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function parseSafetensorsHeader(file: string, head: Buffer, fileSize: number): SafetensorsHeader {
  if (fileSize < 8 || head.length < 8) fail(file, `file is ${fileSize} bytes, shorter than the 8-byte header length`);
  const n = head.readBigUInt64LE(0);
  if (n === 0n || n > BigInt(MAX_HEADER_BYTES)) fail(file, `header length ${n} is outside 1..${MAX_HEADER_BYTES}`);
  const headerBytes = Number(n);
  if (8 + headerBytes > fileSize) fail(file, `header length ${headerBytes} runs past the end of the ${fileSize}-byte file (truncated?)`);
  if (head.length < 8 + headerBytes) fail(file, 'header buffer shorter than the header length');
  let json: unknown;
  try {
    json = JSON.parse(head.subarray(8, 8 + headerBytes).toString('utf8'));
  } catch (e) {
    fail(file, `header is not JSON (${(e as Error).message})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) fail(file, 'header is not a JSON object');
  const dataOffset = 8 + headerBytes;
  const dataSize = fileSize - dataOffset;
  const tensors = new Map<string, TensorEntry>();
  let metadata: Record<string, string> = {};
  for (const [name, raw] of Object.entries(json as Record<string, unknown>)) {
    if (name === '__metadata__') {
      metadata = (raw ?? {}) as Record<string, string>;
      continue;
    }
    const r = raw as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (typeof r !== 'object' || r === null) fail(file, `tensor '${name}' entry is not an object`);
    if (typeof r.dtype !== 'string' || !(r.dtype in DTYPE_BYTES)) fail(file, `tensor '${name}' has unsupported dtype ${JSON.stringify(r.dtype)}`);
    const dtype = r.dtype as SafetensorsDtype;
    if (!Array.isArray(r.shape) || !r.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      fail(file, `tensor '${name}' has an invalid shape ${JSON.stringify(r.shape)}`);
    }
    const shape = r.shape as number[];
    const off = r.data_offsets;
    if (!Array.isArray(off) || off.length !== 2 || !off.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      fail(file, `tensor '${name}' has invalid data_offsets ${JSON.stringify(off)}`);
    }
    const [begin, end] = off as [number, number];
    const want = numel(shape) * DTYPE_BYTES[dtype];
    if (end < begin || end - begin !== want) fail(file, `tensor '${name}' spans ${end - begin} bytes but ${dtype}${JSON.stringify(shape)} needs ${want}`);
    if (end > dataSize) fail(file, `tensor '${name}' ends at data byte ${end} but the data section is ${dataSize} bytes (truncated?)`);
    tensors.set(name, { name, dtype, shape, begin, end });
  }
  const sorted = [...tensors.values()].sort((a, b) => a.begin - b.begin);
  for (let i = 1; i < sorted.length; i++) {
    const prev = sorted[i - 1]!;
    const cur = sorted[i]!;
    if (cur.begin < prev.end) fail(file, `tensors '${prev.name}' and '${cur.name}' overlap`);
  }
  return { headerBytes, dataOffset, tensors, metadata };
}

/** Reads just the header of a safetensors file (the data is not read). */
export function readSafetensorsHeader(file: string): SafetensorsHeader {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const lenBuf = Buffer.alloc(8);
    if (size >= 8) fs.readSync(fd, lenBuf, 0, 8, 0);
    const n = size >= 8 ? Number(lenBuf.readBigUInt64LE(0)) : 0;
    const head = Buffer.alloc(8 + Math.min(Math.max(n, 0), MAX_HEADER_BYTES, Math.max(size - 8, 0)));
    fs.readSync(fd, head, 0, head.length, 0);
    return parseSafetensorsHeader(file, head, size);
  } finally {
    fs.closeSync(fd);
  }
}

/** A whole safetensors file in memory, with typed views of its tensors. */
export class SafetensorsFile {
  readonly header: SafetensorsHeader;
  constructor(readonly file: string, readonly bytes: Buffer) {
    this.header = parseSafetensorsHeader(file, bytes, bytes.length);
  }
  static read(file: string): SafetensorsFile {
    return new SafetensorsFile(file, fs.readFileSync(file));
  }
  has(name: string): boolean {
    return this.header.tensors.has(name);
  }
  entry(name: string): TensorEntry {
    const t = this.header.tensors.get(name);
    if (!t) throw new SafetensorsError(`${this.file}: no tensor '${name}'`);
    return t;
  }
  /** Raw bytes of a tensor (a view, not a copy). */
  raw(name: string): Buffer {
    const t = this.entry(name);
    return this.bytes.subarray(this.header.dataOffset + t.begin, this.header.dataOffset + t.end);
  }
  /** A tensor as f32 (copied, so the result is aligned). */
  f32(name: string): Float32Array {
    const t = this.entry(name);
    if (t.dtype !== 'F32') throw new SafetensorsError(`${this.file}: tensor '${name}' is ${t.dtype}, expected F32`);
    const b = this.raw(name);
    return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
  }
  /** A tensor as i64 values converted to numbers. */
  i64(name: string): number[] {
    const t = this.entry(name);
    if (t.dtype !== 'I64') throw new SafetensorsError(`${this.file}: tensor '${name}' is ${t.dtype}, expected I64`);
    const b = this.raw(name);
    const out: number[] = [];
    for (let i = 0; i < b.length; i += 8) out.push(Number(b.readBigInt64LE(i)));
    return out;
  }
}

export interface TensorToWrite {
  name: string;
  dtype: SafetensorsDtype;
  shape: number[];
  data: Uint8Array;
}

/** Encodes tensors as a safetensors file (keys sorted byte-wise, header padded to 8 bytes). */
export function encodeSafetensors(tensors: TensorToWrite[], metadata: Record<string, string> = {}): Buffer {
  const sorted = [...tensors].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let offset = 0;
  for (const t of sorted) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.data.length] };
    offset += t.data.length;
  }
  let json = JSON.stringify(header);
  while ((8 + Buffer.byteLength(json)) % 8 !== 0) json += ' ';
  const hb = Buffer.from(json, 'utf8');
  const out = Buffer.alloc(8 + hb.length + offset);
  out.writeBigUInt64LE(BigInt(hb.length), 0);
  hb.copy(out, 8);
  let p = 8 + hb.length;
  for (const t of sorted) {
    out.set(t.data, p);
    p += t.data.length;
  }
  return out;
}
