// Checks a checkpoint directory against the family's schemas (sidecar/schema/, read at run time; the C++ loader
// embeds the same files): the safetensors header (via the strict reader), the variant its key set and shapes
// identify (either key naming; class-count axes take the count from class_embed.weight rows, so a fine-tuned
// checkpoint with another class count passes), config.json's id2label against that count and its variant
// fields against the variant, and, for files in the Hub cache, the content hash against the blob's etag.
import fs from 'node:fs';
import crypto from 'node:crypto';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { RfdetrError } from '../errors.ts';
import { SafetensorsError, readSafetensorsHeader } from './safetensors.ts';
import { CLASS_COUNT_TENSOR, checkHeaderAgainstSchemas, loadSchemas, variantConfigFields, type CheckpointSchema } from './schema.ts';
import { checkEtag, type EtagCheck } from './hub-download.ts';

export { loadSchema, loadSchemas } from './schema.ts';

const LIST_MAX = 20;

function listed(names: string[]): string {
  const head = names.slice(0, LIST_MAX).join(', ');
  return names.length > LIST_MAX ? `${head} (and ${names.length - LIST_MAX} more)` : head;
}

function lookup(root: unknown, dotted: string): unknown {
  let cur: unknown = root;
  for (const k of dotted.split('.')) {
    if (typeof cur !== 'object' || cur === null || Array.isArray(cur)) return undefined;
    cur = (cur as Record<string, unknown>)[k];
  }
  return cur ?? undefined;
}

/**
 * Checks config.json's id2label (required: keys 0..n-1 with n = the checkpoint's class count), num_labels, and,
 * given the variant's schema, the fields that name a variant (rfdetr.config_class, image_size, ...).
 */
export function checkConfig(config: unknown, numClasses: number | null, schema?: CheckpointSchema): string[] {
  const problems: string[] = [];
  if (typeof config !== 'object' || config === null || Array.isArray(config)) return ['config.json is not a JSON object'];
  const c = config as { id2label?: unknown; num_labels?: unknown };
  if (typeof c.id2label !== 'object' || c.id2label === null || Array.isArray(c.id2label)) {
    problems.push('config.json has no id2label object (expected {"0": "N/A", "1": "person", ...}, one label per class)');
    return problems;
  }
  const entries = Object.entries(c.id2label as Record<string, unknown>);
  const badKeys = entries.filter(([k]) => !/^(0|[1-9]\d*)$/.test(k)).map(([k]) => JSON.stringify(k));
  if (badKeys.length > 0) problems.push(`config.json id2label has non-integer keys: ${listed(badKeys)}`);
  const badValues = entries.filter(([, v]) => typeof v !== 'string').map(([k]) => k);
  if (badValues.length > 0) problems.push(`config.json id2label has non-string labels for ids ${listed(badValues)}`);
  if (numClasses !== null) {
    if (entries.length !== numClasses) {
      problems.push(`config.json id2label has ${entries.length} labels but the checkpoint has ${numClasses} classes (${CLASS_COUNT_TENSOR} rows)`);
    }
    const outOfRange = entries.map(([k]) => Number(k)).filter((k) => Number.isInteger(k) && (k < 0 || k >= numClasses));
    if (outOfRange.length > 0) problems.push(`config.json id2label ids ${listed(outOfRange.map(String))} are outside 0..${numClasses - 1}`);
    if (c.num_labels !== undefined && c.num_labels !== numClasses) {
      problems.push(`config.json num_labels is ${JSON.stringify(c.num_labels)} but the checkpoint has ${numClasses} classes`);
    }
  }
  if (schema) {
    for (const [field, want] of variantConfigFields(schema)) {
      const got = lookup(config, field);
      if (got !== undefined && JSON.stringify(got) !== JSON.stringify(want)) {
        problems.push(`config.json field ${field} is ${JSON.stringify(got)} but the checkpoint's tensors are ${schema.model} (${schema.configClass}), whose ${field} is ${JSON.stringify(want)}`);
      }
    }
  }
  return problems;
}

export interface FileHash {
  /** 'etag': the file is a Hub cache blob and its content was hashed against the blob name. */
  against: 'etag' | 'none';
  kind: EtagCheck['kind'];
  expected: string | null;
  actual: string;
  ok: boolean | null;
}

/** If `file` resolves into `…/blobs/<etag>`, hashes it against the etag; otherwise reports its sha256 only. */
export async function hashFile(file: string): Promise<FileHash> {
  const real = fs.realpathSync(file);
  const etag = path.basename(real);
  if (path.basename(path.dirname(real)) === 'blobs') {
    const c = await checkEtag(real, etag);
    if (c.kind !== 'none') return { against: 'etag', kind: c.kind, expected: etag, actual: c.actual, ok: c.ok };
  }
  const h = crypto.createHash('sha256');
  await pipeline(fs.createReadStream(real), h);
  return { against: 'none', kind: 'sha256', expected: null, actual: h.digest('hex'), ok: null };
}

export interface VerifyReport {
  ok: boolean;
  problems: string[];
  model: { path: string; bytes: number; tensors: number; numClasses: number | null; variant: string | null; layout: 'upstream' | 'transformers' | null; hash?: FileHash };
  config: { path: string; labels: number | null; hash?: FileHash };
  /** The schema file of the identified (or closest) variant. */
  schema: string;
}

export interface VerifyOptions {
  /** Hash both files (against the cache etag when they are Hub cache blobs). Default true. */
  hashes?: boolean;
  /** A directory of rfdetr-<variant>.json schemas (default sidecar/schema). */
  schemaDir?: string;
}

/** Verifies a model.safetensors + config.json pair; returns every problem found (never throws for bad content). */
/**
 * The variant a checkpoint's tensors are (base, nano, …), read from the safetensors header alone; null when the
 * file cannot be read or matches no variant (the sidecar then refuses it and says why).
 */
export function checkpointVariant(modelFile: string): string | null {
  try {
    const check = checkHeaderAgainstSchemas(readSafetensorsHeader(modelFile), loadSchemas());
    return check.problems.length === 0 ? check.variant : null;
  } catch {
    return null;
  }
}

export async function verifyWeights(files: { model: string; config: string }, opts: VerifyOptions = {}): Promise<VerifyReport> {
  const schemas = loadSchemas(opts.schemaDir);
  const problems: string[] = [];
  const report: VerifyReport = {
    ok: false,
    problems,
    model: { path: files.model, bytes: 0, tensors: 0, numClasses: null, variant: null, layout: null },
    config: { path: files.config, labels: null },
    schema: schemas[0]!.file,
  };
  let schema: CheckpointSchema | undefined;
  try {
    report.model.bytes = fs.statSync(files.model).size;
    const header = readSafetensorsHeader(files.model);
    const check = checkHeaderAgainstSchemas(header, schemas);
    report.model.tensors = check.tensorCount;
    report.model.numClasses = check.numClasses;
    report.model.variant = check.variant;
    report.model.layout = check.layout;
    schema = schemas.find((s) => s.variant === check.variant);
    if (schema) report.schema = schema.file;
    problems.push(...check.problems.map((p) => `${files.model}: ${p}`));
  } catch (e) {
    if (!(e instanceof SafetensorsError) && (e as NodeJS.ErrnoException).code === undefined) throw e;
    problems.push(e instanceof SafetensorsError ? e.message : `${files.model}: ${(e as Error).message}`);
  }
  try {
    const config = JSON.parse(fs.readFileSync(files.config, 'utf8')) as { id2label?: unknown };
    if (config && typeof config.id2label === 'object' && config.id2label !== null) report.config.labels = Object.keys(config.id2label).length;
    problems.push(...checkConfig(config, report.model.numClasses, schema).map((p) => `${files.config}: ${p}`));
  } catch (e) {
    problems.push(`${files.config}: ${e instanceof SyntaxError ? `not valid JSON (${e.message})` : (e as Error).message}`);
  }
  if (opts.hashes !== false) {
    for (const which of ['model', 'config'] as const) {
      try {
        const h = await hashFile(files[which]);
        report[which].hash = h;
        if (h.ok === false) problems.push(`${files[which]}: content ${h.kind} ${h.actual} does not match its cache etag ${h.expected} (corrupted blob; delete it and run rfdetr weights fetch)`);
      } catch {
        // unreadable: already reported above
      }
    }
  }
  report.ok = problems.length === 0;
  return report;
}

/** Throws E_WEIGHTS_INVALID listing every problem unless the pair verifies. */
export async function assertValidWeights(files: { model: string; config: string }, opts: VerifyOptions = {}): Promise<VerifyReport> {
  const report = await verifyWeights(files, opts);
  if (!report.ok) {
    throw new RfdetrError('E_WEIGHTS_INVALID', [
      `the checkpoint is not a supported RF-DETR checkpoint (closest schema: ${report.schema}):`,
      ...report.problems.map((p) => `  - ${p}`),
      'Expected the published Roboflow/rf-detr-base files (rfdetr weights fetch) or a synthetic checkpoint (rfdetr weights synth).',
    ].join('\n'), { problems: report.problems });
  }
  return report;
}
