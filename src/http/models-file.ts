// The models `rfdetr serve` is asked to serve, as entries: `--weights ID=DIR` (repeatable; a bare DIR keeps its
// old meaning, the id following the variant) or `--models FILE`, a JSON file
//   {"models": [{"id": "nano", "weights": "/srv/nano", "engine": "cpu", "precision": "int8"}, ...]}
// ("id" optional as for a bare DIR; "engine" and "precision" default to the flags'; a relative "weights" is
// relative to the file). JSON rather than YAML: the file is small, machine-written as often as hand-written, and
// JSON.parse's errors name the position. A reload re-reads the file and compares each entry, and the checkpoint
// files' identity (size, mtime, inode), with what is served: a checkpoint rewritten in place is a change too.
import fs from 'node:fs';
import path from 'node:path';
import { RfdetrError } from '../errors.ts';

export interface ModelEntry {
  /** The id requests name it by; absent: the variant's (Roboflow/rf-detr-base, rf-detr-nano, …). */
  id?: string;
  /** The checkpoint directory (model.safetensors + config.json); absent: the default resolution (Hub cache, env). */
  weights?: string;
  engine?: string;
  precision?: string;
}

/** A model id a request can name in a query string and a URL path segment (DeepStack's /v1/vision/custom/{model}). */
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

function checkId(id: string, where: string): string {
  if (!ID.test(id)) {
    throw new RfdetrError('E_USAGE', `${where}: model id ${JSON.stringify(id)}: expected 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit (it is used in URLs)`);
  }
  return id;
}

/** One --weights value: ID=DIR, or DIR (also when DIR itself contains '=' and exists as written). */
export function parseWeightsFlag(v: string): ModelEntry {
  const eq = v.indexOf('=');
  if (eq > 0 && !fs.existsSync(v)) {
    const dir = v.slice(eq + 1);
    if (dir === '') throw new RfdetrError('E_USAGE', `--weights ${v}: expected ID=DIR with a directory after '='`);
    return { id: checkId(v.slice(0, eq), '--weights'), weights: dir };
  }
  return { weights: v };
}

const FIELDS = new Set(['id', 'weights', 'engine', 'precision']);

/** Reads and checks a models file; every error names the file, the entry and what was expected. */
export function readModelsFile(file: string): ModelEntry[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new RfdetrError('E_USAGE', `--models ${file}: cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): expected a JSON file {"models": [{"id": …, "weights": DIR}]}`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new RfdetrError('E_USAGE', `--models ${file}: not JSON (${(e as Error).message}): expected {"models": [{"id": …, "weights": DIR}]}`);
  }
  const list = (doc as { models?: unknown } | null)?.models;
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc) || !Array.isArray(list) || list.length === 0) {
    throw new RfdetrError('E_USAGE', `--models ${file}: expected an object with a non-empty "models" array, e.g. {"models": [{"id": "nano", "weights": "/srv/nano"}]}`);
  }
  const base = path.dirname(path.resolve(file));
  const entries = list.map((m: unknown, i): ModelEntry => {
    const where = `--models ${file}: models[${i}]`;
    if (typeof m !== 'object' || m === null || Array.isArray(m)) throw new RfdetrError('E_USAGE', `${where}: expected an object {"id": …, "weights": DIR} but received ${JSON.stringify(m)}`);
    const o = m as Record<string, unknown>;
    const unknown = Object.keys(o).filter((k) => !FIELDS.has(k));
    if (unknown.length > 0) throw new RfdetrError('E_USAGE', `${where}: unknown field ${JSON.stringify(unknown[0])}: expected only ${[...FIELDS].join(', ')}`);
    const e: ModelEntry = {};
    for (const k of FIELDS) {
      const v = o[k];
      if (v === undefined) continue;
      if (typeof v !== 'string' || v === '') throw new RfdetrError('E_USAGE', `${where}.${k}: expected a non-empty string but received ${JSON.stringify(v)}`);
      (e as Record<string, string>)[k] = v;
    }
    if (e.id !== undefined) checkId(e.id, where);
    if (e.weights !== undefined) e.weights = path.resolve(base, e.weights);
    return e;
  });
  checkDistinctIds(entries, `--models ${file}`);
  return entries;
}

/** Two entries with one given id are refused before anything starts. */
export function checkDistinctIds(entries: readonly ModelEntry[], where: string): void {
  const seen = new Set<string>();
  for (const e of entries) {
    if (e.id === undefined) continue;
    if (seen.has(e.id)) throw new RfdetrError('E_USAGE', `${where}: two models have the id ${JSON.stringify(e.id)}: give each its own`);
    seen.add(e.id);
  }
}

/**
 * What a reload compares: the entry and its checkpoint files' identity. A directory that cannot be read gives
 * its error text (a later fix of it is a change).
 */
export function entryFingerprint(e: ModelEntry): string {
  const files = e.weights === undefined ? [] : ['model.safetensors', 'config.json'].map((f) => {
    try {
      const st = fs.statSync(path.join(e.weights!, f));
      return `${f}:${st.size}:${st.mtimeMs}:${st.ino}`;
    } catch (err) {
      return `${f}:${(err as NodeJS.ErrnoException).code ?? 'error'}`;
    }
  });
  return JSON.stringify([e.id ?? null, e.weights ?? null, e.engine ?? null, e.precision ?? null, files]);
}
