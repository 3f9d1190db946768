// What one decode costs and which sharp settings change it (bench, not a test): the images of bench.ts
// (the 640×480 fixture PNG, its JPEG at q90, a 4000×3000 JPEG), each decoded by several sharp pipelines in
// turn (A B C … A B C …, so all see the same load), each call timed (wall) and charged the process's CPU
// time (getrusage: every thread, libuv's pool and libvips's workers included). Every variant's pixels are
// compared with the first's: a variant that changes one byte is marked and may not be used on the default path.
// Then the floor: the same bytes through libjpeg(-turbo)/libpng directly (decode-floor.c, built here with the
// system's cc and libraries; skipped, saying why, when they are missing), its pixels compared with sharp's.
//   node --expose-gc --import tsx bench/server/decode-micro.ts [--n 100] [--images png-640x480,...] [--variants a,b]
//        [--gc] [--floor-identity] [--out FILE]
// --floor-identity: also 32 JPEG variants of two fixture images (q50/90/100, 4:2:0/4:4:4, baseline/progressive,
// odd sizes, grey, mozjpeg's defaults) through libjpeg-turbo directly, each compared with decodeImage's pixels.
// --gc: a full GC before every call (off by default: a collection right before a decode made the 1×1 decode
// 1.2–1.6 ms instead of 0.5–0.8, the cold caches charged to the decode).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import sharp, { type SharpOptions } from 'sharp';
import { testFixturesDir } from '../../src/config/paths.ts';
import { decodeImage } from '../../src/image/decode.ts';
import { median, pct, r2 } from '../stats.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({ options: { n: { type: 'string', default: '100' }, images: { type: 'string' }, variants: { type: 'string' }, gc: { type: 'boolean' }, 'floor-identity': { type: 'boolean' }, out: { type: 'string' } } });
const N = Number(values.n);
const gc = values.gc ? (globalThis as { gc?: () => void }).gc : undefined;

const png = fs.readFileSync(path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'input.png'));
const jpeg = await sharp(png).jpeg({ quality: 90 }).toBuffer();
const big = await sharp(png).resize(4000, 3000, { kernel: 'cubic' }).jpeg({ quality: 90 }).toBuffer();
const tinyPng = await sharp({ create: { width: 1, height: 1, channels: 3, background: '#808080' } }).png().toBuffer();
const tinyJpeg = await sharp(tinyPng).jpeg({ quality: 90 }).toBuffer();
const allImages: Record<string, Buffer> = { 'png-640x480': png, 'jpeg-640x480': jpeg, 'jpeg-4000x3000': big, 'png-1x1': tinyPng, 'jpeg-1x1': tinyJpeg };
const images = values.images ? Object.fromEntries(values.images.split(',').map((k) => [k, allImages[k]!])) : allImages;

/** decode.ts's options, as the server passes them. */
const OPTS: SharpOptions = { limitInputPixels: 8192 * 8192, failOn: 'error', ignoreIcc: true, autoOrient: false, sequentialRead: true };
type Variant = { name: string; what: string; run: (b: Buffer) => Promise<Uint8Array>; before?: () => void; after?: () => void };
const full = (b: Buffer, o: SharpOptions) => sharp(b, o).removeAlpha().toColourspace('srgb').raw({ depth: 'uchar' }).toBuffer();
const allVariants: Variant[] = [
  { name: 'server', what: "decodeImage (src/image/decode.ts, thread: false): the server's decode and bench.ts's baseline", run: async (b) => (await decodeImage(b, { thread: false })).data },
  { name: 'pipeline', what: 'the sharp pipeline decode.ts runs: removeAlpha, toColourspace(srgb), raw uchar', run: (b) => full(b, OPTS) },
  { name: 'plain', what: 'sharp(bytes).raw().toBuffer(): sharp with no options', run: (b) => sharp(b).raw().toBuffer() },
  { name: 'bare', what: "decode.ts's options, raw() only (no removeAlpha, no toColourspace)", run: (b) => sharp(b, OPTS).raw().toBuffer() },
  { name: 'random', what: 'the pipeline with sequentialRead: false', run: (b) => full(b, { ...OPTS, sequentialRead: false }) },
  { name: 'nolimit', what: 'the pipeline with limitInputPixels: false', run: (b) => full(b, { ...OPTS, limitInputPixels: false }) },
  { name: 'nocache', what: "the pipeline with libvips's operation cache off (sharp.cache(false))", run: (b) => full(b, OPTS), before: () => sharp.cache(false), after: () => sharp.cache(true) },
  { name: 'nice10', what: "the pipeline with every thread but the main one at nice 10 (serve's --decode-nice default; src/image/decode-priority.ts)", run: (b) => full(b, OPTS), before: () => renice(10), after: () => renice(0) },
  { name: 'conc2', what: 'the pipeline with sharp.concurrency(2) (libvips threads per image; the default here is 1)', run: (b) => full(b, OPTS), before: () => sharp.concurrency(2), after: () => sharp.concurrency(1) },
];
const variants = values.variants ? values.variants.split(',').map((v) => allVariants.find((x) => x.name === v) ?? (() => { throw new Error(`unknown variant '${v}'; expected one of ${allVariants.map((x) => x.name).join(', ')}`); })()) : allVariants;

/** Every thread of this process but the main one to `nice` (lowering it again needs root or CAP_SYS_NICE). */
function renice(nice: number): void {
  for (const tid of fs.readdirSync('/proc/self/task').map(Number)) {
    if (tid !== process.pid) try { os.setPriority(tid, nice); } catch { /* a thread that just ended */ }
  }
}
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const load0 = os.loadavg();
const results: Record<string, Record<string, unknown>> = {};
for (const [name, bytes] of Object.entries(images)) {
  const ref = await variants[0]!.run(bytes);
  const wall: number[][] = variants.map(() => []);
  const cpu: number[][] = variants.map(() => []);
  const same = variants.map(() => true);
  for (let i = 0; i < 3; i++) for (const v of variants) await v.run(bytes);
  // The 12 MP decode takes ~70 ms: a quarter of the calls.
  const reps = name.includes('4000') ? Math.max(5, N >> 2) : N;
  for (let i = 0; i < reps; i++) {
    for (const [vi, v] of variants.entries()) {
      gc?.();
      v.before?.();
      const c0 = cpuMs();
      const t0 = performance.now();
      const px = await v.run(bytes);
      wall[vi]!.push(performance.now() - t0);
      cpu[vi]!.push(cpuMs() - c0);
      v.after?.();
      if (i === 0) same[vi] = px.length === ref.length && Buffer.compare(Buffer.from(px.buffer, px.byteOffset, px.length), Buffer.from(ref.buffer, ref.byteOffset, ref.length)) === 0;
    }
  }
  results[name] = Object.fromEntries(variants.map((v, vi) => [v.name, { wall_ms_p50: r2(median(wall[vi]!)), wall_ms_p90: r2(pct(wall[vi]!, 90)), cpu_ms_p50: r2(median(cpu[vi]!)), cpu_ms_mean: r2(cpu[vi]!.reduce((a, x) => a + x, 0) / reps), same_pixels: same[vi] }]));
  console.log(`${name} (${bytes.length} bytes), n ${reps}, p50 wall / cpu ms:`);
  for (const [vi, v] of variants.entries()) {
    const r = results[name]![v.name] as { wall_ms_p50: number; cpu_ms_p50: number; wall_ms_p90: number };
    console.log(`  ${v.name.padEnd(9)} ${String(r.wall_ms_p50).padStart(7)} / ${String(r.cpu_ms_p50).padStart(7)}  (p90 ${r.wall_ms_p90})${same[vi] ? '' : '  PIXELS DIFFER'}`);
  }
}
/** decode-floor.c built once, or why not. */
function buildFloor(): string | Error {
  const bin = path.join(os.tmpdir(), `rfdetr-decode-floor-${process.pid}`);
  try {
    execFileSync('cc', ['-O2', '-o', bin, path.join(here, 'decode-floor.c'), '-ljpeg', '-lpng'], { stdio: ['ignore', 'ignore', 'pipe'] });
    return bin;
  } catch (e) {
    return new Error(`decode-floor.c did not build (${(e as Error).message.split('\n')[0]}): it needs cc and the libjpeg and libpng development files (Debian: libjpeg62-turbo-dev libpng-dev)`);
  }
}
const floorBin = buildFloor();
const floor: Record<string, unknown> = {};
if (floorBin instanceof Error) {
  console.log(`floor skipped: ${floorBin.message}`);
  floor.skipped = floorBin.message;
} else {
  for (const [name, bytes] of Object.entries(images)) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-decode-floor-'));
    fs.writeFileSync(path.join(dir, 'in'), bytes);
    const line = execFileSync(floorBin, [path.join(dir, 'in'), String(name.includes('4000') ? Math.max(5, N >> 2) : N), path.join(dir, 'out.rgb')], { encoding: 'utf8' }).trim();
    const m = /p50 ([\d.]+) ms, cpu ([\d.]+) ms/.exec(line);
    const ref = await decodeImage(bytes, { thread: false });
    const same = fs.readFileSync(path.join(dir, 'out.rgb')).equals(Buffer.from(ref.data.buffer, ref.data.byteOffset, ref.data.length));
    fs.rmSync(dir, { recursive: true });
    floor[name] = { line, wall_ms_p50: Number(m?.[1]), cpu_ms_per_decode: Number(m?.[2]), same_pixels_as_server: same };
    console.log(`floor ${name}: ${line}${same ? ', the same pixels as decodeImage' : ', PIXELS DIFFER from decodeImage'}`);
  }
  if (values['floor-identity']) floor.identity = await floorIdentity(floorBin);
  fs.rmSync(floorBin);
}

/** libjpeg-turbo's pixels against decodeImage's on JPEG variants sharp encodes from the fixture images. */
async function floorIdentity(bin: string): Promise<{ identical: number; of: number; differ: string[] }> {
  const cases: Array<[string, () => Promise<Buffer>]> = [];
  for (const c of ['case-1', 'case-2']) {
    const src = fs.readFileSync(path.join(testFixturesDir, 'rfdetr-synth', c, 'input.png'));
    for (const q of [50, 90, 100]) for (const cs of ['4:2:0', '4:4:4']) for (const progressive of [false, true]) {
      cases.push([`${c} q${q} ${cs}${progressive ? ' progressive' : ''}`, () => sharp(src).jpeg({ quality: q, chromaSubsampling: cs, progressive }).toBuffer()]);
    }
    cases.push([`${c} 641x479 q85`, () => sharp(src).resize(641, 479, { fit: 'fill' }).jpeg({ quality: 85 }).toBuffer()]);
    cases.push([`${c} 333x17 q85 4:4:4`, () => sharp(src).resize(333, 17, { fit: 'fill' }).jpeg({ quality: 85, chromaSubsampling: '4:4:4' }).toBuffer()]);
    cases.push([`${c} grey q90`, () => sharp(src).greyscale().jpeg({ quality: 90 }).toBuffer()]);
    cases.push([`${c} mozjpeg defaults`, () => sharp(src).jpeg({ mozjpeg: true }).toBuffer()]);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-decode-floor-'));
  const differ: string[] = [];
  for (const [name, make] of cases) {
    const bytes = await make();
    fs.writeFileSync(path.join(dir, 'in.jpg'), bytes);
    execFileSync(bin, [path.join(dir, 'in.jpg'), '1', path.join(dir, 'out.rgb')]);
    const ref = await decodeImage(bytes, { thread: false });
    if (!fs.readFileSync(path.join(dir, 'out.rgb')).equals(Buffer.from(ref.data.buffer, ref.data.byteOffset, ref.data.length))) differ.push(name);
  }
  fs.rmSync(dir, { recursive: true });
  console.log(`floor identity: libjpeg-turbo gives decodeImage's pixels for ${cases.length - differ.length}/${cases.length} JPEG variants${differ.length ? `; differ: ${differ.join(', ')}` : ''}`);
  return { identical: cases.length - differ.length, of: cases.length, differ };
}
const out = values.out ?? path.join(here, 'decode-micro.json');
fs.writeFileSync(out, JSON.stringify({ date: new Date().toISOString(), load_before: load0.map(r2), load_after: os.loadavg().map(r2), n: N, sharp: sharp.versions, variants: Object.fromEntries(variants.map((v) => [v.name, v.what])), results, floor }, null, 2) + '\n');
console.log(`load ${load0.map(r2).join(' ')} -> ${os.loadavg().map(r2).join(' ')}; wrote ${out}`);
