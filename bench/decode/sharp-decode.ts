// Times the server's own decode (src/image/decode.ts decodeImage, sharp) on the files bench-decode times, and
// writes the standard inputs first when asked. Not a test.
//   node --import tsx bench/decode/sharp-decode.ts --write DIR    (640x480 and 1920x1080, PNG and JPEG q90, from case-1)
//   node --import tsx bench/decode/sharp-decode.ts [--runs N] FILE...
// Per file: the median and min wall time of one decodeImage (sequential, thread: false) and the median process CPU
// time (user+system, process.cpuUsage: sharp decodes in libuv's pool), after one warm-up decode.
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { decodeImage } from '../../src/image/decode.ts';
import { defaultSmokeImage } from '../../src/config/paths.ts';

async function writeInputs(dir: string): Promise<void> {
  fs.mkdirSync(dir, { recursive: true });
  const src = fs.readFileSync(defaultSmokeImage); // 640x480
  const big = await sharp(src).resize(1920, 1080, { fit: 'fill', kernel: 'lanczos3' }).png().toBuffer();
  for (const [name, img] of [['640x480', src], ['1920x1080', big]] as const) {
    fs.writeFileSync(path.join(dir, `${name}.png`), await sharp(img).png().toBuffer());
    fs.writeFileSync(path.join(dir, `${name}-q90.jpg`), await sharp(img).jpeg({ quality: 90 }).toBuffer());
  }
  process.stdout.write(`wrote ${fs.readdirSync(dir).sort().join(' ')} in ${dir}\n`);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === '--write' && args[1]) return writeInputs(args[1]);
  let runs = 30;
  if (args[0] === '--runs') {
    runs = Math.max(1, Number(args[1]));
    args.splice(0, 2);
  }
  if (args.length === 0) throw new Error('usage: sharp-decode.ts --write DIR | [--runs N] FILE...');
  process.stdout.write(`${'file'.padEnd(40)} ${'median_ms'.padStart(10)} ${'min_ms'.padStart(8)} ${'cpu_ms'.padStart(8)}\n`);
  for (const file of args) {
    const bytes = fs.readFileSync(file);
    await decodeImage(bytes, { thread: false });
    const wall: number[] = [];
    const cpu: number[] = [];
    for (let r = 0; r < runs; r++) {
      const c0 = process.cpuUsage();
      const t0 = process.hrtime.bigint();
      await decodeImage(bytes, { thread: false });
      wall.push(Number(process.hrtime.bigint() - t0) / 1e6);
      const c = process.cpuUsage(c0);
      cpu.push((c.user + c.system) / 1e3);
    }
    process.stdout.write(`${path.basename(file).padEnd(40)} ${median(wall).toFixed(3).padStart(10)} ${Math.min(...wall).toFixed(3).padStart(8)} ${median(cpu).toFixed(3).padStart(8)}\n`);
  }
}

await main();
