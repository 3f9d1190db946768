// Writes the fuzz targets' seed corpora (sidecar/fuzz/corpus/TARGET/), committed so CI starts from them:
//   png-fuzz, jpeg-fuzz  the sidecar-decode identity corpus (test/image/decode-corpus.ts: sharp's forms, the
//                        hand-built PNGs, test/fixtures/jpeg-forms), files up to 64 KB (the 640x480 fixtures cost
//                        the fuzzer more time per input than they add coverage)
//   protocol-fuzz        the golden frames (test/fixtures/frames/*.bin), good and bad
//   safetensors-fuzz     the headers of rfdetr-synth checkpoints (base, nano, nano with 3 classes, seg-nano) in the
//                        target's [u32 data size][header] form
//   config-fuzz          their config.json files and the embedded COCO config, as [variant][classes-1][text]
//   shm-fuzz             one valid reference per slot and a few wrong ones, in the target's FuzzedDataProvider layout
// Run: node --import tsx scripts/fuzz-seeds.ts  (needs sidecar/build/rfdetr-synth). Regression inputs of past
// findings (finding-*) and the inputs merged from long runs (`TARGET -merge=1 sidecar/fuzz/corpus/TARGET
// sidecar/build-fuzz/corpus/TARGET`, named by their SHA-1) live beside the seeds and are kept.
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { decodeCorpus } from '../test/image/decode-corpus.ts';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const corpus = path.join(root, 'sidecar/fuzz/corpus');

function reset(target: string): string {
  const dir = path.join(corpus, target);
  fs.mkdirSync(dir, { recursive: true });
  // Kept: finding-* (past findings) and the 40-hex-digit inputs libFuzzer's -merge=1 added from long runs.
  for (const f of fs.readdirSync(dir)) if (!f.startsWith('finding-') && !/^[0-9a-f]{40}$/.test(f)) fs.rmSync(path.join(dir, f));
  return dir;
}

function put(dir: string, name: string, bytes: Buffer): void {
  const safe = name.replace(/[^A-Za-z0-9._-]+/g, '-').replace(/^-|-$/g, '').slice(0, 80);
  const tag = crypto.createHash('sha1').update(bytes).digest('hex').slice(0, 8);
  fs.writeFileSync(path.join(dir, `${safe}-${tag}`), bytes);
}

const png = reset('png-fuzz');
const jpeg = reset('jpeg-fuzz');
for (const c of await decodeCorpus()) {
  if (c.bytes.length <= 64 * 1024) put(c.format === 'png' ? png : jpeg, c.name, c.bytes);
}

const frames = reset('protocol-fuzz');
const framesDir = path.join(root, 'test/fixtures/frames');
for (const f of fs.readdirSync(framesDir).filter((f) => f.endsWith('.bin'))) put(frames, f, fs.readFileSync(path.join(framesDir, f)));

const st = reset('safetensors-fuzz');
const cfg = reset('config-fuzz');
const synth = path.join(root, 'sidecar/build/rfdetr-synth');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fuzz-seeds-'));
// The variant byte indexes schemas_all() (model/schema.cpp's order: base, nano, small, medium, large,
// large_deprecated, seg-nano, ...).
const variantIndex: Record<string, number> = { base: 0, nano: 1, 'seg-nano': 6 };
for (const [name, args, variant, classes] of [
  ['base', ['--variant', 'base'], 'base', 91],
  ['nano', ['--variant', 'nano'], 'nano', 91],
  ['nano-3-classes', ['--variant', 'nano', '--num-classes', '3'], 'nano', 3],
  ['seg-nano', ['--variant', 'seg-nano'], 'seg-nano', 91],
] as const) {
  const out = path.join(tmp, name);
  execFileSync(synth, ['--seed', '1', '--out', out, '--quiet', ...args], { stdio: 'ignore' });
  const file = fs.readFileSync(path.join(out, 'model.safetensors'));
  const n = Number(file.readBigUInt64LE(0));
  const d = Buffer.alloc(4);
  d.writeUInt32LE(file.length - 8 - n);
  put(st, name, Buffer.concat([d, file.subarray(8, 8 + n)]));
  put(cfg, name, Buffer.concat([Buffer.from([variantIndex[variant]!, classes - 1]), fs.readFileSync(path.join(out, 'config.json'))]));
}
fs.rmSync(tmp, { recursive: true });
put(cfg, 'coco-config', Buffer.concat([Buffer.from([0, 90]), fs.readFileSync(path.join(root, 'sidecar/schema/coco-config.json'))]));

const shm = reset('shm-fuzz');
const u64 = (v: bigint) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(v); return b; };
// FuzzedDataProvider takes integers from the end of the input, bytes from the front: [name..][height][width][length][offset][pick].
const ref = (pick: number, offset: bigint, length: bigint, w: bigint, h: bigint, name = '') =>
  Buffer.concat([Buffer.from(name), u64(h), u64(w), u64(length), u64(offset), Buffer.from([pick])]);
put(shm, 'slot0-640x480', ref(0, 0n, 640n * 480n * 3n, 640n, 480n));
put(shm, 'slot1-offset', ref(1, 4096n, 17n * 13n * 3n, 17n, 13n));
put(shm, 'slot0-full', ref(0, 0n, 8192n * 8192n * 3n, 8192n, 8192n));
put(shm, 'slot0-past-end', ref(0, 1n, 8192n * 8192n * 3n, 8192n, 8192n));
put(shm, 'wrong-length', ref(1, 0n, 12n, 2n, 2n));
put(shm, 'foreign-name', ref(200, 0n, 3n, 1n, 1n, '../../etc/passwd'));
console.log(`fuzz-seeds: ${fs.readdirSync(corpus).map((t) => `${t} ${fs.readdirSync(path.join(corpus, t)).length}`).join(', ')}`);
