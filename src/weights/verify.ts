// Checks a checkpoint directory against the ONE schema, sidecar/schema/rfdetr-base.json (read at run time; the
// C++ loader reads the same file): the safetensors header (via the strict reader), the exact key set, dtype and
// shape of every tensor (class-count axes take the count from class_embed.weight rows, so a fine-tuned
// checkpoint with another class count passes), config.json's id2label against that count, and, for files in the
// Hub cache, the content hash against the blob's etag.
import fs from 'node:fs';
import crypto from 'node:crypto';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { schemaPath } from '../config/paths.ts';
import { RfdetrError } from '../errors.ts';
import { SafetensorsError, readSafetensorsHeader, type SafetensorsHeader } from './safetensors.ts';
import { checkEtag, type EtagCheck } from './hub-download.ts';

export interface SchemaTensor {
  name: string;
  shape: number[];
  /** The axis whose size is the class count (91 for COCO). */
  classAxis?: number;
}

export interface CheckpointSchema {
  file: string;
  model: string;
  dtype: string;
  numClasses: number;
  tensors: SchemaTensor[];
}

/** The tensor whose rows give the class count. */
export const CLASS_COUNT_TENSOR = 'class_embed.weight';
const LIST_MAX = 20;

export function loadSchema(file: string = schemaPath): CheckpointSchema {
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new RfdetrError('E_WEIGHTS_INVALID', `cannot read the checkpoint schema ${file}: ${(e as Error).message}; the package install is incomplete`);
  }
  const r = raw as { model?: unknown; dtype?: unknown; num_classes?: unknown; count?: unknown; tensors?: unknown };
  if (!Array.isArray(r.tensors) || typeof r.dtype !== 'string' || typeof r.num_classes !== 'number') {
    throw new RfdetrError('E_WEIGHTS_INVALID', `checkpoint schema ${file} lacks tensors/dtype/num_classes`);
  }
  const tensors = r.tensors.map((t: { name?: unknown; shape?: unknown; class_axis?: unknown }, i: number): SchemaTensor => {
    if (typeof t.name !== 'string' || !Array.isArray(t.shape) || !t.shape.every((d) => Number.isSafeInteger(d))) {
      throw new RfdetrError('E_WEIGHTS_INVALID', `checkpoint schema ${file}: entry ${i} lacks a name or an integer shape`);
    }
    return typeof t.class_axis === 'number' ? { name: t.name, shape: t.shape as number[], classAxis: t.class_axis } : { name: t.name, shape: t.shape as number[] };
  });
  if (typeof r.count === 'number' && r.count !== tensors.length) {
    throw new RfdetrError('E_WEIGHTS_INVALID', `checkpoint schema ${file} says count ${r.count} but lists ${tensors.length} tensors`);
  }
  return { file, model: String(r.model ?? ''), dtype: r.dtype, numClasses: r.num_classes, tensors };
}

function listed(names: string[]): string {
  const head = names.slice(0, LIST_MAX).join(', ');
  return names.length > LIST_MAX ? `${head} (and ${names.length - LIST_MAX} more)` : head;
}

export interface SchemaCheck {
  /** class_embed.weight rows, or null when that tensor is absent or malformed. */
  numClasses: number | null;
  tensorCount: number;
  problems: string[];
}

/** Compares a safetensors header with the schema; every missing, unexpected or misshapen tensor is named. */
export function checkHeaderAgainstSchema(header: SafetensorsHeader, schema: CheckpointSchema): SchemaCheck {
  const problems: string[] = [];
  const cls = header.tensors.get(CLASS_COUNT_TENSOR);
  let numClasses: number | null = null;
  if (!cls) {
    problems.push(`tensor '${CLASS_COUNT_TENSOR}' is missing, so the class count is unknown (expected [classes, 256], ${schema.numClasses} classes for COCO)`);
  } else if (cls.shape.length !== 2 || cls.shape[0]! < 1) {
    problems.push(`tensor '${CLASS_COUNT_TENSOR}' has shape ${JSON.stringify(cls.shape)}; expected [classes, 256]`);
  } else {
    numClasses = cls.shape[0]!;
  }
  const want = new Map(schema.tensors.map((t) => [t.name, t]));
  const missing = schema.tensors.filter((t) => !header.tensors.has(t.name)).map((t) => t.name);
  const unexpected = [...header.tensors.keys()].filter((k) => !want.has(k));
  if (missing.length > 0) problems.push(`${missing.length} tensor(s) missing: ${listed(missing)}`);
  if (unexpected.length > 0) problems.push(`${unexpected.length} unexpected tensor(s): ${listed(unexpected)}`);
  const misshapen: string[] = [];
  const wrongDtype: string[] = [];
  for (const t of schema.tensors) {
    const got = header.tensors.get(t.name);
    if (!got) continue;
    const expected = t.shape.slice();
    if (t.classAxis !== undefined) expected[t.classAxis] = numClasses ?? schema.numClasses;
    if (got.shape.length !== expected.length || got.shape.some((d, i) => d !== expected[i])) {
      misshapen.push(`${t.name} is ${JSON.stringify(got.shape)}, expected ${JSON.stringify(expected)}`);
    }
    if (got.dtype !== schema.dtype) wrongDtype.push(`${t.name} is ${got.dtype}`);
  }
  if (misshapen.length > 0) problems.push(`${misshapen.length} misshapen tensor(s): ${listed(misshapen)}`);
  if (wrongDtype.length > 0) problems.push(`${wrongDtype.length} tensor(s) not ${schema.dtype}: ${listed(wrongDtype)}`);
  return { numClasses, tensorCount: header.tensors.size, problems };
}

/** Checks config.json's id2label (required: keys 0..n-1 with n = the checkpoint's class count) and num_labels. */
export function checkConfig(config: unknown, numClasses: number | null): string[] {
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
  model: { path: string; bytes: number; tensors: number; numClasses: number | null; hash?: FileHash };
  config: { path: string; labels: number | null; hash?: FileHash };
  schema: string;
}

export interface VerifyOptions {
  /** Hash both files (against the cache etag when they are Hub cache blobs). Default true. */
  hashes?: boolean;
  schemaFile?: string;
}

/** Verifies a model.safetensors + config.json pair; returns every problem found (never throws for bad content). */
export async function verifyWeights(files: { model: string; config: string }, opts: VerifyOptions = {}): Promise<VerifyReport> {
  const schema = loadSchema(opts.schemaFile);
  const problems: string[] = [];
  const report: VerifyReport = {
    ok: false,
    problems,
    model: { path: files.model, bytes: 0, tensors: 0, numClasses: null },
    config: { path: files.config, labels: null },
    schema: schema.file,
  };
  try {
    report.model.bytes = fs.statSync(files.model).size;
    const header = readSafetensorsHeader(files.model);
    const check = checkHeaderAgainstSchema(header, schema);
    report.model.tensors = check.tensorCount;
    report.model.numClasses = check.numClasses;
    problems.push(...check.problems.map((p) => `${files.model}: ${p}`));
  } catch (e) {
    if (!(e instanceof SafetensorsError) && (e as NodeJS.ErrnoException).code === undefined) throw e;
    problems.push(e instanceof SafetensorsError ? e.message : `${files.model}: ${(e as Error).message}`);
  }
  try {
    const config = JSON.parse(fs.readFileSync(files.config, 'utf8')) as { id2label?: unknown };
    if (config && typeof config.id2label === 'object' && config.id2label !== null) report.config.labels = Object.keys(config.id2label).length;
    problems.push(...checkConfig(config, report.model.numClasses).map((p) => `${files.config}: ${p}`));
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
      `the checkpoint does not match the RF-DETR-base schema (${report.schema}):`,
      ...report.problems.map((p) => `  - ${p}`),
      'Expected the published Roboflow/rf-detr-base files (rfdetr weights fetch) or a synthetic checkpoint (rfdetr weights synth).',
    ].join('\n'), { problems: report.problems });
  }
  return report;
}
