// Hand-written PNG files for decode tests: exact control over colour type, bit depth, palette and tRNS, and
// headers that lie (decompression bombs), independent of the encoder under test.
import zlib from 'node:zlib';

function chunk(type: string, data: Uint8Array): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(zlib.crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

export interface PngSpec {
  width: number;
  height: number;
  /** 0 grey, 2 RGB, 3 palette, 4 grey+alpha, 6 RGBA. */
  colourType: 0 | 2 | 3 | 4 | 6;
  bitDepth: 1 | 2 | 4 | 8 | 16;
  /** Packed scanlines without filter bytes (each row ceil(width*channels*bitDepth/8) bytes). */
  rows?: Uint8Array;
  palette?: Uint8Array;
  trns?: Uint8Array;
  /** Override the compressed data (e.g. a tiny stream for a header that declares a huge image). */
  idat?: Uint8Array;
}

const CHANNELS: Record<PngSpec['colourType'], number> = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 };

export function makePng(spec: PngSpec): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(spec.width, 0);
  ihdr.writeUInt32BE(spec.height, 4);
  ihdr[8] = spec.bitDepth;
  ihdr[9] = spec.colourType;
  const parts = [Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr)];
  if (spec.palette) parts.push(chunk('PLTE', spec.palette));
  if (spec.trns) parts.push(chunk('tRNS', spec.trns));
  let idat = spec.idat;
  if (!idat) {
    const stride = Math.ceil((spec.width * CHANNELS[spec.colourType] * spec.bitDepth) / 8);
    const rows = spec.rows ?? new Uint8Array(stride * spec.height);
    if (rows.length !== stride * spec.height) throw new Error(`makePng: rows hold ${rows.length} bytes, expected ${stride * spec.height}`);
    const raw = Buffer.alloc((stride + 1) * spec.height);
    for (let y = 0; y < spec.height; y++) raw.set(rows.subarray(y * stride, (y + 1) * stride), y * (stride + 1) + 1);
    idat = zlib.deflateSync(raw);
  }
  parts.push(chunk('IDAT', idat), chunk('IEND', new Uint8Array(0)));
  return Buffer.concat(parts);
}

/** Big-endian 16-bit samples as PNG stores them. */
export function be16(values: readonly number[]): Uint8Array {
  const out = Buffer.alloc(values.length * 2);
  values.forEach((v, i) => out.writeUInt16BE(v, i * 2));
  return out;
}

/** The PNG without its chunks of the given type (e.g. 'iCCP'). */
export function dropChunks(png: Buffer, type: string): Buffer {
  const parts = [png.subarray(0, 8)];
  for (let o = 8; o < png.length;) {
    const len = png.readUInt32BE(o);
    const end = o + 12 + len;
    if (png.toString('latin1', o + 4, o + 8) !== type) parts.push(png.subarray(o, end));
    o = end;
  }
  return Buffer.concat(parts);
}
