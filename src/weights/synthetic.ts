// Whether a checkpoint says it is synthetic (made by rfdetr-synth, SPEC v1): config.json "synthetic": true or
// the safetensors __metadata__ "synthetic": "true" (the generator writes both, with the seed). Such weights
// load and run like the real ones, but their detections are meaningless; every command says so.
import fs from 'node:fs';
import { readSafetensorsHeader } from './safetensors.ts';

export interface SyntheticMark {
  synthetic: boolean;
  /** The generator seed ("0x1") when the files name one. */
  seed: string | null;
}

/** Reads the marks from config.json and the safetensors header (no tensor data); unreadable files say "no". */
export function syntheticMark(files: { model: string; config: string }): SyntheticMark {
  let synthetic = false;
  let seed: string | null = null;
  try {
    const cfg = JSON.parse(fs.readFileSync(files.config, 'utf8')) as { synthetic?: unknown; synthetic_seed?: unknown };
    if (cfg.synthetic === true) synthetic = true;
    if (typeof cfg.synthetic_seed === 'string') seed = cfg.synthetic_seed;
  } catch {
    // verify reports a broken config.json; here it only means "not marked".
  }
  try {
    const meta = readSafetensorsHeader(files.model).metadata;
    if (meta.synthetic === 'true') synthetic = true;
    if (seed === null && typeof meta.seed === 'string') seed = meta.seed;
  } catch {
    // Likewise for an unreadable header.
  }
  return { synthetic, seed: synthetic ? seed : null };
}

/** The one warning line, for stderr. */
export function syntheticWarning(dir: string, mark: SyntheticMark): string {
  return `WARNING: ${dir} holds SYNTHETIC weights (rfdetr weights synth${mark.seed ? `, seed ${mark.seed}` : ''}): detections are meaningless. Use the published checkpoint (rfdetr weights fetch) for real results.`;
}

/** A server's GET /info answer says its weights are synthetic (weights block `"synthetic": true`). */
export function serverHasSyntheticWeights(info: unknown): boolean {
  if (typeof info !== 'object' || info === null || !('weights' in info)) return false;
  const w = info.weights;
  return typeof w === 'object' && w !== null && 'synthetic' in w && w.synthetic === true;
}
