// The identity corpus for the in-sidecar decode (sidecar-decode-identity.test.ts): PNG and JPEG files written by
// sharp in the forms clients send, hand-built PNGs for what sharp cannot write (low-bit grey, 16-bit tRNS,
// ancillary chunks), the repo's fixture images and the libjpeg-written forms in test/fixtures/jpeg-forms/.
// Each case says whether the sidecar decoder is meant to decline it, and why (`declines`: a pattern its reason
// must match); every other case must decode to exactly decodeImage's bytes.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import sharp, { type JpegOptions, type PngOptions } from 'sharp';
import { testFixturesDir } from '../../src/config/paths.ts';
import { be16, makePng } from './png-helper.ts';

export interface DecodeCase {
  name: string;
  format: 'png' | 'jpeg';
  bytes: Buffer;
  width: number;
  height: number;
  /** Set for the forms the sidecar decoder must decline: a pattern its reason matches. */
  declines?: RegExp;
}

/** The forms meant to decline, and the reason each names. */
export const DECLINED_FORMS = {
  interlaced: /Adam7-interlaced/,
  grey16: /16-bit greyscale/,
  lowBitGrey: /[124]-bit greyscale/,
  cmyk: /CMYK JPEG/,
} as const;

/** Smooth gradients with noise, so filters, DCT coefficients and chroma upsampling all matter. */
function pixels(w: number, h: number, channels: number, seed: number): Buffer {
  const out = Buffer.alloc(w * h * channels);
  let s = seed >>> 0;
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      for (let c = 0; c < channels; c++) {
        s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
        out[(y * w + x) * channels + c] = (x * 3 + y * (c + 2) + c * 50 + ((s >>> 24) & 15)) & 0xff;
      }
    }
  }
  return out;
}

function pixels16(w: number, h: number, channels: number, seed: number): Uint16Array {
  const b = pixels(w, h, channels, seed);
  const out = new Uint16Array(w * h * channels);
  for (let i = 0; i < out.length; i++) out[i] = (b[i]! << 8) | ((i * 37) & 0xff);
  return out;
}

function u32s(values: number[]): Buffer {
  const b = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => b.writeUInt32BE(v, i * 4));
  return b;
}

/** The PNG with a chunk inserted right after IHDR. */
function withChunk(png: Buffer, type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(zlib.crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
  return Buffer.concat([png.subarray(0, 33), head, data, crc, png.subarray(33)]);
}

const SIZES: Array<[number, number]> = [[1, 1], [3, 7], [64, 48], [641, 479]];
const BIG: Array<[number, number]> = [[64, 48], [641, 479]];

async function pngCases(): Promise<DecodeCase[]> {
  const cases: DecodeCase[] = [];
  const add = (name: string, bytes: Buffer, width: number, height: number, declines?: RegExp) =>
    cases.push({ name, format: 'png', bytes, width, height, ...(declines ? { declines } : {}) });
  const kinds: Array<{ kind: string; channels: number; grey: boolean }> = [
    { kind: 'rgb8', channels: 3, grey: false }, { kind: 'rgba8', channels: 4, grey: false },
    { kind: 'grey8', channels: 1, grey: true }, { kind: 'greyalpha8', channels: 2, grey: true },
  ];
  for (const [w, h] of SIZES) {
    const settings: PngOptions[] = w < 8 ? [{}] : [0, 6, 9].flatMap((compressionLevel) => [false, true].map((adaptiveFiltering) => ({ compressionLevel, adaptiveFiltering })));
    for (const k of kinds) {
      for (const opts of settings) {
        const img = sharp(pixels(w, h, k.channels, w + k.channels), { raw: { width: w, height: h, channels: k.channels as 1 | 2 | 3 | 4 } });
        add(`${k.kind} ${w}x${h} ${JSON.stringify(opts)}`, await (k.grey ? img.toColourspace('b-w') : img).png(opts).toBuffer(), w, h);
      }
    }
    for (const [kind, channels, space] of [['rgb16', 3, 'rgb16'], ['rgba16', 4, 'rgb16'], ['greyalpha16', 2, 'grey16']] as const) {
      add(`${kind} ${w}x${h}`, await sharp(pixels16(w, h, channels, w), { raw: { width: w, height: h, channels } }).toColourspace(space).png().toBuffer(), w, h);
    }
    add(`grey16 ${w}x${h}`, await sharp(pixels16(w, h, 1, w), { raw: { width: w, height: h, channels: 1 } }).toColourspace('grey16').png().toBuffer(), w, h, DECLINED_FORMS.grey16);
    for (const bitdepth of [1, 2, 4, 8] as const) {
      for (const channels of [3, 4] as const) {
        const png = await sharp(pixels(w, h, channels, bitdepth), { raw: { width: w, height: h, channels } }).png({ palette: true, colours: 1 << bitdepth }).toBuffer();
        if (png[24] !== bitdepth || png[25] !== 3) throw new Error(`decode-corpus: sharp wrote a depth ${png[24]} colour type ${png[25]} PNG for a ${bitdepth}-bit palette`);
        add(`palette${bitdepth}${channels === 4 ? '+tRNS' : ''} ${w}x${h}`, png, w, h);
      }
    }
  }
  for (const [w, h] of BIG) {
    add(`interlaced rgb8 ${w}x${h}`, await sharp(pixels(w, h, 3, 1), { raw: { width: w, height: h, channels: 3 } }).png({ progressive: true }).toBuffer(), w, h, DECLINED_FORMS.interlaced);
    add(`interlaced palette ${w}x${h}`, await sharp(pixels(w, h, 3, 1), { raw: { width: w, height: h, channels: 3 } }).png({ progressive: true, palette: true }).toBuffer(), w, h, DECLINED_FORMS.interlaced);
    const plain = await sharp(pixels(w, h, 3, 9), { raw: { width: w, height: h, channels: 3 } }).png().toBuffer();
    // Ancillary chunks that could change a decoder's output: none may change sharp's (ignoreIcc, no gamma).
    add(`gAMA 0.2 ${w}x${h}`, withChunk(plain, 'gAMA', Buffer.from([0, 0, 0x4e, 0x20])), w, h);
    add(`sBIT 5 ${w}x${h}`, withChunk(plain, 'sBIT', Buffer.from([5, 5, 5])), w, h);
    add(`cHRM ${w}x${h}`, withChunk(plain, 'cHRM', u32s([31270, 32900, 64000, 33000, 30000, 60000, 15000, 6000])), w, h);
    add(`sRGB ${w}x${h}`, withChunk(plain, 'sRGB', Buffer.from([0])), w, h);
    add(`pHYs tEXt ${w}x${h}`, withChunk(withChunk(plain, 'pHYs', Buffer.from([0, 0, 0x0b, 0x13, 0, 0, 0x0b, 0x13, 1])), 'tEXt', Buffer.from('Comment\0hello')), w, h);
    add(`bKGD ${w}x${h}`, withChunk(plain, 'bKGD', Buffer.from([0, 255, 0, 0, 0, 0])), w, h);
    add(`iCCP p3 ${w}x${h}`, await sharp(pixels(w, h, 3, 9), { raw: { width: w, height: h, channels: 3 } }).withIccProfile('p3').png().toBuffer(), w, h);
  }
  // What sharp does not write: low-bit grey, 16-bit colour with tRNS, grey with tRNS (hand-built, filter 0).
  for (const depth of [1, 2, 4] as const) {
    const stride = Math.ceil((13 * depth) / 8);
    add(`grey${depth} 13x5`, makePng({ width: 13, height: 5, colourType: 0, bitDepth: depth, rows: pixels(stride, 5, 1, depth) }), 13, 5, DECLINED_FORMS.lowBitGrey);
  }
  add('rgb16+tRNS 5x4', makePng({ width: 5, height: 4, colourType: 2, bitDepth: 16, rows: Buffer.from(pixels16(5, 4, 3, 3).buffer).swap16(), trns: be16([1, 2, 3]) }), 5, 4);
  add('grey8+tRNS 5x4', makePng({ width: 5, height: 4, colourType: 0, bitDepth: 8, rows: pixels(5, 4, 1, 4), trns: be16([7]) }), 5, 4);
  for (const name of ['case-1', 'case-2', 'case-3']) {
    const bytes = fs.readFileSync(path.join(testFixturesDir, 'rfdetr-synth', name, 'input.png'));
    add(`fixture rfdetr-synth/${name}/input.png`, bytes, bytes.readUInt32BE(16), bytes.readUInt32BE(20));
  }
  return cases;
}

async function jpegCases(): Promise<DecodeCase[]> {
  const cases: DecodeCase[] = [];
  const add = (name: string, bytes: Buffer, width: number, height: number, declines?: RegExp) =>
    cases.push({ name, format: 'jpeg', bytes, width, height, ...(declines ? { declines } : {}) });
  const rgb = (w: number, h: number, seed = 1) => sharp(pixels(w, h, 3, seed), { raw: { width: w, height: h, channels: 3 } });
  for (const [w, h] of [[641, 479], [17, 13]] as const) {
    for (const quality of [50, 90, 100]) {
      for (const chromaSubsampling of ['4:4:4', '4:2:0']) {
        for (const progressive of [false, true]) {
          const opts: JpegOptions = { quality, chromaSubsampling, progressive };
          add(`jpeg ${w}x${h} ${JSON.stringify(opts)}`, await rgb(w, h).jpeg(opts).toBuffer(), w, h);
        }
      }
    }
  }
  for (const [w, h] of SIZES) {
    add(`jpeg ${w}x${h} default`, await rgb(w, h, 2).jpeg().toBuffer(), w, h);
    add(`jpeg grey ${w}x${h}`, await rgb(w, h, 3).toColourspace('b-w').jpeg().toBuffer(), w, h);
    add(`jpeg grey progressive ${w}x${h}`, await rgb(w, h, 3).toColourspace('b-w').jpeg({ progressive: true }).toBuffer(), w, h);
  }
  const [w, h] = [641, 479];
  const variants: Record<string, JpegOptions> = {
    optimiseCoding: { optimiseCoding: true },
    'optimiseCoding false': { optimiseCoding: false },
    mozjpeg: { mozjpeg: true },
    trellisQuantisation: { trellisQuantisation: true },
    overshootDeringing: { overshootDeringing: true },
    optimiseScans: { progressive: true, optimiseScans: true },
    quantisationTable3: { quantisationTable: 3 },
    quantisationTable8: { quantisationTable: 8 },
  };
  for (const [name, opts] of Object.entries(variants)) add(`jpeg ${w}x${h} ${name}`, await rgb(w, h, 4).jpeg(opts).toBuffer(), w, h);
  add(`jpeg EXIF orientation 6 ${w}x${h}`, await rgb(w, h, 5).withMetadata({ orientation: 6 }).jpeg().toBuffer(), w, h);
  add(`jpeg ICC p3 ${w}x${h}`, await rgb(w, h, 5).withIccProfile('p3').jpeg().toBuffer(), w, h);
  add(`jpeg CMYK ${w}x${h}`, await rgb(w, h, 6).toColourspace('cmyk').jpeg().toBuffer(), w, h, DECLINED_FORMS.cmyk);
  const formsDir = path.join(testFixturesDir, 'jpeg-forms');
  for (const file of fs.existsSync(formsDir) ? fs.readdirSync(formsDir).filter((f) => f.endsWith('.jpg')).sort() : []) {
    const bytes = fs.readFileSync(path.join(formsDir, file));
    const meta = await sharp(bytes).metadata();
    add(`fixture jpeg-forms/${file}`, bytes, meta.width, meta.height);
  }
  return cases;
}

export async function decodeCorpus(): Promise<DecodeCase[]> {
  return [...(await pngCases()), ...(await jpegCases())];
}
