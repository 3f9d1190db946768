// Image path timings: decode (sharp), preprocess (bit-exact resize + normalise) inline and on the worker, and
// decode + preprocess together on the worker, with the event-loop delay each one causes. Baseline, measured in the same run: sharp's own 560x560 bilinear resize
// to u8 (not what the reference computes, but the floor a native resize reaches).
// Run: node --import tsx bench/image/preprocess.bench.ts [--runs N]   (writes bench/image/results.json)
import fs from 'node:fs';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import { decodeImage, type RgbImage } from '../../src/image/decode.ts';
import { preprocess } from '../../src/image/preprocess.ts';
import { closePreprocessWorker, decodeAndPreprocessAsync, preprocessAsync } from '../../src/image/preprocess-async.ts';

const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 9;

function synthetic(width: number, height: number): RgbImage {
  const data = new Uint8Array(width * height * 3);
  let s = 12345;
  for (let y = 0, i = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      const n = (s >>> 28) - 8;
      data[i++] = Math.max(0, Math.min(255, ((x * 255) / width + n) | 0));
      data[i++] = Math.max(0, Math.min(255, ((y * 255) / height + n) | 0));
      data[i++] = ((x ^ y) & 32) ? 220 : 30;
    }
  }
  return { data, width, height };
}

interface Stat { median: number; p90: number; min: number }
function stat(xs: number[]): Stat {
  const s = [...xs].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)]!, p90: s[Math.min(s.length - 1, Math.floor(s.length * 0.9))]!, min: s[0]! };
}

/**
 * Wall and process CPU time (all threads: main, worker, libuv pool) per call, and the longest event-loop delay
 * seen while the calls ran. A synchronous call blocks the loop for its whole wall time, so for `sync` calls the
 * loop delay is the wall time itself (the delay monitor cannot sample while the loop is blocked).
 */
async function time(fn: () => unknown | Promise<unknown>, runs: number, sync = false): Promise<{ wall: Stat; cpu: Stat; loopMaxMs: number }> {
  await fn(); // warm-up (JIT, weight cache, worker start)
  const wall: number[] = [];
  const cpu: number[] = [];
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  for (let i = 0; i < runs; i++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    await fn();
    wall.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
    await new Promise((resolve) => setImmediate(resolve));
  }
  h.disable();
  return { wall: stat(wall), cpu: stat(cpu), loopMaxMs: sync ? Math.max(...wall) : h.max / 1e6 };
}

const results: Record<string, unknown> = { date: new Date().toISOString(), runs: RUNS, node: process.version, loadavg: (await import('node:os')).loadavg() };
const lines: string[] = [];
for (const [w, h] of [[640, 480], [4000, 3000]] as const) {
  const img = synthetic(w, h);
  const raw = { raw: { width: w, height: h, channels: 3 as const } };
  const png = await sharp(img.data, raw).png().toBuffer();
  const jpg = await sharp(img.data, raw).jpeg({ quality: 90 }).toBuffer();
  const runs = w > 1000 ? Math.max(3, Math.ceil(RUNS / 3)) : RUNS;
  const r = {
    decodePng: await time(() => decodeImage(png), runs),
    decodeJpeg: await time(() => decodeImage(jpg), runs),
    preprocessInline: await time(() => preprocess(img), runs, true),
    preprocessWorker: await time(() => preprocessAsync(img), runs),
    decodeAndPreprocessWorkerPng: await time(() => decodeAndPreprocessAsync(png), runs),
    decodeAndPreprocessWorkerJpeg: await time(() => decodeAndPreprocessAsync(jpg), runs),
    baselineSharpResizeU8: await time(() => sharp(img.data, raw).resize(560, 560, { fit: 'fill', kernel: 'linear' }).raw().toBuffer(), runs),
  };
  results[`${w}x${h}`] = { pngBytes: png.length, jpegBytes: jpg.length, ...r };
  const b = r.baselineSharpResizeU8.wall.median;
  for (const [name, v] of Object.entries(r)) {
    lines.push(`${`${w}x${h}`.padEnd(10)} ${name.padEnd(29)} wall median ${v.wall.median.toFixed(1).padStart(7)} ms  p90 ${v.wall.p90.toFixed(1).padStart(7)}  process cpu ${v.cpu.median.toFixed(1).padStart(7)} ms  loop max ${v.loopMaxMs.toFixed(1).padStart(6)} ms  x baseline ${(v.wall.median / b).toFixed(2)}`);
  }
}
await closePreprocessWorker();
const out = path.join(path.dirname(fileURLToPath(import.meta.url)), 'results.json');
fs.writeFileSync(out, JSON.stringify(results, null, 1));
console.log(lines.join('\n'));
console.log(`load average at start: ${(results.loadavg as number[]).map((x) => x.toFixed(1)).join(' ')}; results in ${out}`);
