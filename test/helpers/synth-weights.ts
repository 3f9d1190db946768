// Synthetic RF-DETR-base checkpoints for tests (rfdetr-synth SPEC v1, random values: detections are meaningless).
//
//   const dir = await synthWeights();      // seed 1: DIR/model.safetensors + DIR/config.json (COCO-91)
//   const dir7 = await synthWeights(5n, 7); // a fine-tuned-shaped checkpoint with 7 classes
//   const seg = await synthVariantWeights('seg-nano');  // seed 1 of another variant (test-weights/family/)
//
// Generated once by the built `sidecar/build/rfdetr-synth` into sidecar/build/test-weights/seed-0x<hex>/
// (…-c<N> for other class counts) and reused. Safe when several test files (processes) ask at once: each
// generates into its own temporary directory and renames it into place; a loser of the rename race uses the
// winner's copy. The C++ side gets the same seed-1 directory from the ctest fixture `synth_seed1`
// (sidecar/tools/CMakeLists.txt); rfdetr-synth renames config.json before model.safetensors, so a directory
// with both files is complete.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { packageRoot, synthBinary } from '../../src/config/paths.ts';

/** Where synthWeights() caches checkpoints. */
export const synthCacheDir = path.join(packageRoot, 'sidecar', 'build', 'test-weights');

const MAX_SEED = (1n << 64n) - 1n;
const pending = new Map<string, Promise<string>>();

/** The cache directory name for a seed and class count: "seed-0x1", "seed-0x5-c7". */
export function synthDirName(seed: bigint, numClasses = 91): string {
  return `seed-0x${seed.toString(16)}${numClasses === 91 ? '' : `-c${numClasses}`}`;
}

function complete(dir: string): boolean {
  return fs.existsSync(path.join(dir, 'config.json')) && fs.existsSync(path.join(dir, 'model.safetensors'));
}

/** A cached synthetic checkpoint directory for `seed` (generated on first use). */
export function synthWeights(seed = 1n, numClasses = 91): Promise<string> {
  const key = `${seed}/${numClasses}`;
  let p = pending.get(key);
  if (!p) {
    p = synthWeightsIn(synthCacheDir, seed, numClasses);
    pending.set(key, p);
    p.catch(() => pending.delete(key));
  }
  return p;
}

/** Like synthWeights, under another cache root and without the in-process memo (tests of the helper). */
export async function synthWeightsIn(root: string, seed: bigint, numClasses = 91): Promise<string> {
  if (seed < 0n || seed > MAX_SEED) throw new RangeError(`synthWeights: seed ${seed} is outside 0..2^64-1`);
  if (!Number.isInteger(numClasses) || numClasses < 1) throw new RangeError(`synthWeights: numClasses ${numClasses} must be a positive integer`);
  const dir = path.join(root, synthDirName(seed, numClasses));
  return generate(dir, ['--seed', `0x${seed.toString(16)}`, '--num-classes', String(numClasses), '--quiet']);
}

/**
 * The seed-1 checkpoint of another variant ("nano", …, "seg-nano", …) in sidecar/build/test-weights/family/
 * <variant>-seed-0x1: the directory the ctest fixtures synth_family / synth_seg write (generated here when absent).
 */
export function synthVariantWeights(variant: string): Promise<string> {
  const key = `variant:${variant}`;
  let p = pending.get(key);
  if (!p) {
    p = generate(path.join(synthCacheDir, 'family', `${variant}-${synthDirName(1n)}`), ['--seed', '1', '--variant', variant, '--quiet']);
    pending.set(key, p);
    p.catch(() => pending.delete(key));
  }
  return p;
}

async function generate(dir: string, args: string[]): Promise<string> {
  const root = path.dirname(dir);
  if (complete(dir)) return dir;
  const bin = synthBinary();
  if (!fs.existsSync(bin)) {
    throw new Error(`synthWeights: ${bin} does not exist; build the sidecar first (npm run build:sidecar)`);
  }
  fs.mkdirSync(root, { recursive: true });
  if (fs.existsSync(dir)) {
    // Present but incomplete: another writer is mid-way (rfdetr-synth replaces each file atomically), or a
    // past run was killed. Writing in place is safe: the bytes are the same whoever writes them.
    await execa(bin, [...args, '--out', dir]);
    return dir;
  }
  const tmp = fs.mkdtempSync(path.join(root, `.tmp-${path.basename(dir)}-${process.pid}-`));
  try {
    await execa(bin, [...args, '--out', tmp]);
    try {
      fs.renameSync(tmp, dir);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw e;
      // Another process renamed its copy first; use it.
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  if (!complete(dir)) throw new Error(`synthWeights: ${dir} is incomplete after generation`);
  return dir;
}

/** A fresh temporary directory (removed by the caller). */
export function tempDir(prefix = 'rfdetr-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}
