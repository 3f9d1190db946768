// Writes the PNG corpus inflate-probe times (never a test): each file named CLASS--NAME.png, so the table can be
// grouped by class. Not a test.
//   node --import tsx bench/decode/inflate-corpus.ts DIR
// Classes: fixture (the repo's and shared/'s fixture PNGs as stored), bench (bench/decode's 640x480/1920x1080 PNG,
// sharp default), corpus (decode-corpus.ts's sharp-written PNGs of 640x480 or more that decode), screen (SVG UI
// mock-ups rendered by sharp: flat colours, text-like edges, gradients; 1280x720 and 1920x1080), photo (a fixture
// photo Lanczos-resized, zlib level 1/6/9, adaptive filtering off/on) and noise (gradient plus noise, same settings).
import fs from 'node:fs';
import path from 'node:path';
import sharp, { type Sharp } from 'sharp';
import { decodeCorpus } from '../../test/image/decode-corpus.ts';
import { testFixturesDir } from '../../src/config/paths.ts';

function screenSvg(w: number, h: number, seed: number): string {
  let s = seed >>> 0;
  const rnd = (n: number) => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) >>> 8) % n;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}">`,
    '<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1"><stop offset="0" stop-color="#2b5876"/><stop offset="1" stop-color="#4e4376"/></linearGradient>',
    '<linearGradient id="b" x1="0" y1="0" x2="0" y2="1"><stop offset="0" stop-color="#fdfdfd"/><stop offset="1" stop-color="#d8dce3"/></linearGradient></defs>',
    `<rect width="${w}" height="${h}" fill="#f3f4f6"/>`,
    `<rect width="${w}" height="${Math.round(h * 0.08)}" fill="url(#g)"/>`,
    `<rect y="${Math.round(h * 0.08)}" width="${Math.round(w * 0.18)}" height="${h}" fill="#1f2937"/>`,
  ];
  for (let i = 0; i < 14; i++) {
    const y = Math.round(h * 0.12) + i * Math.round(h * 0.055);
    parts.push(`<text x="${Math.round(w * 0.02)}" y="${y}" font-family="sans-serif" font-size="${Math.round(h * 0.025)}" fill="#e5e7eb">Menu item ${i + 1}</text>`);
  }
  for (let i = 0; i < 6; i++) {
    const x = Math.round(w * 0.2) + (i % 3) * Math.round(w * 0.26), y = Math.round(h * 0.12) + Math.floor(i / 3) * Math.round(h * 0.42);
    parts.push(`<rect x="${x}" y="${y}" rx="8" width="${Math.round(w * 0.24)}" height="${Math.round(h * 0.38)}" fill="url(#b)" stroke="#9ca3af"/>`);
    for (let l = 0; l < 9; l++) {
      const words = Array.from({ length: 3 + rnd(5) }, () => 'lorem ipsum dolor sit amet'.split(' ')[rnd(5)]).join(' ');
      parts.push(`<text x="${x + 12}" y="${y + 28 + l * Math.round(h * 0.035)}" font-family="sans-serif" font-size="${Math.round(h * 0.022)}" fill="#111827">${words} ${rnd(1000)}</text>`);
    }
    parts.push(`<rect x="${x + 12}" y="${y + Math.round(h * 0.32)}" rx="4" width="90" height="26" fill="#${['2563eb', '16a34a', 'dc2626'][i % 3]}"/>`);
  }
  parts.push('</svg>');
  return parts.join('');
}

// decode-corpus names as file names: "rgb8 641x479 {"compressionLevel":9,"adaptiveFiltering":true}" -> rgb8_641x479_l9_adaptive.
function shortName(name: string): string {
  return name.replace(/"compressionLevel":(\d)/, "l$1").replace(/,?"adaptiveFiltering":true/, "_adaptive")
    .replace(/,?"adaptiveFiltering":false/, "").replace(/[^A-Za-z0-9]+/g, "_").replace(/_$/, "");
}

function noise(w: number, h: number): Buffer {
  const out = Buffer.alloc(w * h * 3);
  let s = 7;
  for (let i = 0; i < out.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const x = (i / 3) % w, y = Math.floor(i / 3 / w);
    out[i] = (((x + y) >> 2) + (i % 3) * 60 + ((s >>> 24) & 31)) & 0xff;
  }
  return out;
}

async function main(): Promise<void> {
  const dir = process.argv[2];
  if (!dir) throw new Error('usage: inflate-corpus.ts DIR');
  fs.mkdirSync(dir, { recursive: true });
  const put = (name: string, bytes: Buffer) => fs.writeFileSync(path.join(dir, `${name}.png`), bytes);
  for (const name of ['case-1', 'case-2', 'case-3']) put(`fixture--synth-${name}`, fs.readFileSync(path.join(testFixturesDir, 'rfdetr-synth', name, 'input.png')));
  const family = path.resolve(testFixturesDir, '../../../shared/fixtures/rfdetr-family');
  const familyDirs = [family, '/work/shared/fixtures/rfdetr-family'].find((d) => fs.existsSync(d));
  for (const model of familyDirs ? fs.readdirSync(familyDirs).sort() : []) {
    const file = path.join(familyDirs!, model, 'case-1', 'input.png');
    if (fs.existsSync(file)) put(`fixture--family-${model}`, fs.readFileSync(file));
  }
  const photo = fs.readFileSync(path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'input.png'));
  const big = await sharp(photo).resize(1920, 1080, { fit: 'fill', kernel: 'lanczos3' }).png().toBuffer();
  put('bench--640x480', await sharp(photo).png().toBuffer());
  put('bench--1920x1080', await sharp(big).png().toBuffer());
  for (const c of await decodeCorpus()) {
    if (c.format !== 'png' || c.declines || c.name.startsWith('fixture') || c.width * c.height < 640 * 478) continue;
    put(`corpus--${shortName(c.name)}`, c.bytes);
  }
  for (const [w, h] of [[1280, 720], [1920, 1080]] as const) {
    const svg = Buffer.from(screenSvg(w, h, w));
    put(`screen--${w}x${h}-default`, await sharp(svg).png().toBuffer());
    put(`screen--${w}x${h}-l9-adaptive`, await sharp(svg).png({ compressionLevel: 9, adaptiveFiltering: true }).toBuffer());
    put(`screen--${w}x${h}-palette`, await sharp(svg).png({ palette: true }).toBuffer());
  }
  const sources: Array<[string, Sharp]> = [
    ['photo-1280x720', sharp(photo).resize(1280, 720, { fit: 'fill', kernel: 'lanczos3' })],
    ['photo-1920x1080', sharp(big)],
    ['noise-1920x1080', sharp(noise(1920, 1080), { raw: { width: 1920, height: 1080, channels: 3 } })],
  ];
  for (const [name, img] of sources) {
    const raw = await img.raw().toBuffer({ resolveWithObject: true });
    for (const compressionLevel of [1, 6, 9]) {
      for (const adaptiveFiltering of [false, true]) {
        const png = await sharp(raw.data, { raw: { width: raw.info.width, height: raw.info.height, channels: raw.info.channels } })
          .png({ compressionLevel, adaptiveFiltering }).toBuffer();
        put(`${name.split('-')[0]}--${name.slice(name.indexOf('-') + 1)}-l${compressionLevel}${adaptiveFiltering ? '-adaptive' : ''}`, png);
      }
    }
  }
  process.stdout.write(`wrote ${fs.readdirSync(dir).length} PNGs in ${dir}\n`);
}

await main();
