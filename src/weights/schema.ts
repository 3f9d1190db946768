// The family's checkpoint schemas (sidecar/schema/rfdetr-<variant>.json) and transformers' native key names
// (sidecar/schema/transformers-keys.json), the same files the C++ loader embeds: which variant a safetensors
// header holds, under either key naming, with every missing, unexpected or misshapen tensor named against the
// closest variant, and unsupported kinds (keypoint heads, other backbones, detection XL/2XL, transformers-named
// Seg) named. RF-DETR Seg checkpoints (segmentation_head.*) are variants like the others (seg-nano, ...).
import fs from 'node:fs';
import path from 'node:path';
import { schemaDir } from '../config/paths.ts';
import { RfdetrError } from '../errors.ts';
import type { SafetensorsHeader } from './safetensors.ts';

export interface SchemaTensor {
  name: string;
  shape: number[];
  /** The axis whose size is the class count (91 for COCO). */
  classAxis?: number;
}

export interface VariantArchitecture {
  /** "detect", or "segment" for RF-DETR Seg (which adds mask_downsample and mask_blocks). */
  task: 'detect' | 'segment';
  encoder: string;
  resolution: number;
  patch_size: number;
  num_windows: number;
  out_feature_indexes: number[];
  projector_scale: string[];
  dec_layers: number;
  [field: string]: unknown;
}

export interface CheckpointSchema {
  file: string;
  variant: string;
  model: string;
  configClass: string;
  dtype: string;
  numClasses: number;
  architecture: VariantArchitecture;
  tensors: SchemaTensor[];
}

/** The tensor whose rows give the class count. */
export const CLASS_COUNT_TENSOR = 'class_embed.weight';
const LIST_MAX = 20;
const ORDER = ['base', 'nano', 'small', 'medium', 'large', 'large_deprecated', 'seg-nano', 'seg-small', 'seg-medium', 'seg-large', 'seg-xlarge', 'seg-2xlarge'];

function invalid(file: string, what: string): never {
  throw new RfdetrError('E_WEIGHTS_INVALID', `checkpoint schema ${file}: ${what}; the package install is incomplete`);
}

export function loadSchema(file: string = path.join(schemaDir, 'rfdetr-base.json')): CheckpointSchema {
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    invalid(file, `cannot read it (${(e as Error).message})`);
  }
  const r = raw as { variant?: unknown; model?: unknown; config_class?: unknown; dtype?: unknown; num_classes?: unknown; count?: unknown; architecture?: unknown; tensors?: unknown };
  if (!Array.isArray(r.tensors) || typeof r.dtype !== 'string' || typeof r.num_classes !== 'number' || typeof r.variant !== 'string' || typeof r.architecture !== 'object') {
    invalid(file, 'it lacks variant/architecture/tensors/dtype/num_classes');
  }
  const tensors = r.tensors.map((t: { name?: unknown; shape?: unknown; class_axis?: unknown }, i: number): SchemaTensor => {
    if (typeof t.name !== 'string' || !Array.isArray(t.shape) || !t.shape.every((d) => Number.isSafeInteger(d))) invalid(file, `entry ${i} lacks a name or an integer shape`);
    return typeof t.class_axis === 'number' ? { name: t.name, shape: t.shape as number[], classAxis: t.class_axis } : { name: t.name, shape: t.shape as number[] };
  });
  if (typeof r.count === 'number' && r.count !== tensors.length) invalid(file, `count ${r.count} but ${tensors.length} tensors listed`);
  return {
    file, variant: r.variant, model: String(r.model ?? r.variant), configClass: String(r.config_class ?? ''), dtype: r.dtype,
    numClasses: r.num_classes, architecture: r.architecture as VariantArchitecture, tensors,
  };
}

let cache: CheckpointSchema[] | undefined;

/** Every variant's schema, base first. */
export function loadSchemas(dir: string = schemaDir): CheckpointSchema[] {
  if (dir === schemaDir && cache) return cache;
  const files = fs.readdirSync(dir).filter((f) => /^rfdetr-.+\.json$/.test(f));
  const all = files.map((f) => loadSchema(path.join(dir, f)));
  const rank = (s: CheckpointSchema) => (ORDER.includes(s.variant) ? ORDER.indexOf(s.variant) : ORDER.length);
  all.sort((a, b) => rank(a) - rank(b));
  if (all[0]?.variant !== 'base') invalid(path.join(dir, 'rfdetr-base.json'), 'it is missing');
  if (dir === schemaDir) cache = all;
  return all;
}

export function schemaFor(variant: string): CheckpointSchema {
  const s = loadSchemas().find((x) => x.variant === variant);
  if (!s) throw new RfdetrError('E_USAGE', `Expected a variant (${variantNames().join(', ')}) but received ${JSON.stringify(variant)}`);
  return s;
}

export function variantNames(): string[] {
  return loadSchemas().map((s) => s.variant);
}

/** The sentence every refusal ends with. */
export function supportedText(): string {
  return `Supported: RF-DETR detection and segmentation (Seg) checkpoints of the variants ${loadSchemas().map((s) => `${s.variant} (${s.model})`).join(', ')}, with upstream rfdetr key names (or, for detection, transformers' RfDetrForObjectDetection names), any class count, in safetensors format.`;
}

interface KeyRule {
  re: RegExp;
  upstream: string;
  fuse?: { part: number; order: string[] };
}

let keyMap: { marker: RegExp; rules: KeyRule[] } | undefined;

function transformersKeys(): { marker: RegExp; rules: KeyRule[] } {
  if (keyMap) return keyMap;
  const file = path.join(schemaDir, 'transformers-keys.json');
  const j = JSON.parse(fs.readFileSync(file, 'utf8')) as { marker: string; rules: { native: string; upstream: string; fuse?: { part: number; order: string[] } }[] };
  keyMap = { marker: new RegExp(j.marker), rules: j.rules.map((r) => ({ re: new RegExp(r.native), upstream: r.upstream, ...(r.fuse ? { fuse: r.fuse } : {}) })) };
  return keyMap;
}

interface Mapped {
  shape: number[];
  dtype: string;
}

/** The header's tensors under upstream names (transformers' names mapped, split q/k/v fused); problems named. */
function mapNames(header: SafetensorsHeader): { layout: 'upstream' | 'transformers'; tensors: Map<string, Mapped>; problems: string[] } {
  const km = transformersKeys();
  const names = [...header.tensors.keys()];
  if (!names.some((n) => km.marker.test(n))) {
    return { layout: 'upstream', tensors: new Map([...header.tensors.values()].map((t) => [t.name, { shape: t.shape, dtype: t.dtype }])), problems: [] };
  }
  const out = new Map<string, Mapped>();
  const fused = new Map<string, { order: string[]; parts: Map<number, Mapped> }>();
  const unmatched: string[] = [];
  const twice: string[] = [];
  for (const t of header.tensors.values()) {
    const rule = km.rules.find((r) => r.re.test(t.name));
    if (!rule) {
      unmatched.push(t.name);
      continue;
    }
    const m = rule.re.exec(t.name)!;
    const up = rule.upstream.replace(/\$(\d)/g, (_, g: string) => m[Number(g)] ?? '');
    if (rule.fuse) {
      const g = fused.get(up) ?? { order: rule.fuse.order, parts: new Map() };
      const part = rule.fuse.order.indexOf(m[rule.fuse.part] ?? '');
      if (g.parts.has(part)) twice.push(t.name);
      g.parts.set(part, { shape: t.shape, dtype: t.dtype });
      fused.set(up, g);
    } else if (out.has(up)) {
      twice.push(`${t.name} (-> ${up})`);
    } else {
      out.set(up, { shape: t.shape, dtype: t.dtype });
    }
  }
  const problems: string[] = [];
  // transformers-keys.json maps the detection layout only; RfDetrForInstanceSegmentation's head names were never
  // checked against a saved file, so a transformers-named Seg checkpoint is refused by name.
  const segKey = unmatched.find((n) => n.includes('segmentation') || n.includes('mask'));
  if (segKey) {
    problems.push(`transformers key names with a segmentation head (${segKey}): RF-DETR Seg checkpoints are read only with upstream rfdetr key names (segmentation_head.*, as rfdetr saves them); transformers' RfDetrForInstanceSegmentation layout is not supported. Save the model's state_dict with rfdetr, or convert the key names`);
    return { layout: 'transformers', tensors: out, problems };
  }
  if (unmatched.length > 0) problems.push(`transformers (RfDetrForObjectDetection) key names, but ${unmatched.length} key(s) match no rule of its RF-DETR detection layout: ${listed(unmatched)}`);
  if (twice.length > 0) problems.push(`${twice.length} key(s) name a tensor another key already gives: ${listed(twice)}`);
  for (const [up, g] of fused) {
    const parts = g.order.map((_, i) => g.parts.get(i));
    const missing = g.order.filter((_, i) => !parts[i]);
    if (missing.length > 0) {
      problems.push(`${up} is made of the split q/k/v tensors, but its ${missing.join(', ')} part(s) are missing`);
      continue;
    }
    const first = parts[0]!;
    if (parts.some((p) => JSON.stringify(p!.shape) !== JSON.stringify(first.shape)) || first.shape.length === 0) {
      problems.push(`${up} is made of the split q/k/v tensors, but its parts have different shapes`);
      continue;
    }
    out.set(up, { shape: [first.shape[0]! * parts.length, ...first.shape.slice(1)], dtype: first.dtype });
  }
  return { layout: 'transformers', tensors: out, problems };
}

function listed(names: string[]): string {
  const head = names.slice(0, LIST_MAX).join(', ');
  return names.length > LIST_MAX ? `${head} (and ${names.length - LIST_MAX} more)` : head;
}

function unsupportedKind(m: Map<string, Mapped>, header: SafetensorsHeader): string | null {
  let segHead = false;
  for (const name of header.tensors.keys()) {
    segHead ||= name.startsWith('segmentation_head.');
    if (name.includes('keypoint')) return `an RF-DETR keypoint checkpoint (it has ${name}): keypoint heads are not served here`;
  }
  const names = [...m.keys()];
  const vit = names.some((n) => n.startsWith('backbone.0.encoder.encoder.'));
  const other = names.some((n) => n.startsWith('backbone.0.') && !n.startsWith('backbone.0.projector.') && !n.startsWith('backbone.0.encoder.encoder.'));
  if (!vit && other) return 'a DETR checkpoint with another backbone (backbone.0.* tensors but no DINOv2 backbone.0.encoder.encoder.*)';
  const pe = m.get('backbone.0.encoder.encoder.embeddings.patch_embeddings.projection.weight');
  if (pe && pe.shape.length === 4 && pe.shape[2] === 12 && !segHead) return 'a patch-12 DINOv2 backbone without segmentation_head.* tensors: only RF-DETR Seg models use patch 12, and they have a segmentation head';
  const cls = m.get('backbone.0.encoder.encoder.embeddings.cls_token');
  if (cls && cls.shape.length === 3) {
    const width = cls.shape[2]!;
    if (width === 768 && !m.has('backbone.0.projector.stages_sampling.0.0.0.weight')) {
      return 'a ViT-B (768-wide) backbone with a single-level projector, as RF-DETR XLarge/2XLarge (rfdetr_plus) use; only LargeDeprecated (ViT-B with the P3+P5 projector) is served with a ViT-B';
    }
    if (width !== 384 && width !== 768) return `a ${width}-wide ViT backbone: only DINOv2-S (384) and, for LargeDeprecated, DINOv2-B (768) are served`;
  }
  return null;
}

export interface SchemaCheck {
  /** The variant the tensors are (or, with problems, the closest one). */
  variant: string | null;
  layout: 'upstream' | 'transformers';
  /** class_embed.weight rows, or null when that tensor is absent or malformed. */
  numClasses: number | null;
  tensorCount: number;
  problems: string[];
}

function fitProblems(schema: CheckpointSchema, m: Map<string, Mapped>): { problems: string[]; numClasses: number | null; keyErrors: number; loose: number } {
  const problems: string[] = [];
  const cls = m.get(CLASS_COUNT_TENSOR);
  let numClasses: number | null = null;
  if (!cls) problems.push(`tensor '${CLASS_COUNT_TENSOR}' is missing, so the class count is unknown (expected [classes, ${schema.architecture.d_model as number}], ${schema.numClasses} classes for COCO)`);
  else if (cls.shape.length !== 2 || cls.shape[0]! < 1) problems.push(`tensor '${CLASS_COUNT_TENSOR}' has shape ${JSON.stringify(cls.shape)}; expected [classes, ${schema.architecture.d_model as number}]`);
  else numClasses = cls.shape[0]!;
  const want = new Map(schema.tensors.map((t) => [t.name, t]));
  const suffixes = new Set<string>();
  for (const n of m.keys()) for (let i = n.indexOf('.'); i >= 0; i = n.indexOf('.', i + 1)) suffixes.add(n.slice(i + 1));
  const missing = schema.tensors.filter((t) => !m.has(t.name)).map((t) => t.name);
  const unexpected = [...m.keys()].filter((k) => !want.has(k));
  const loose = schema.tensors.filter((t) => m.has(t.name) || suffixes.has(t.name)).length;
  if (missing.length > 0) problems.push(`${missing.length} tensor(s) missing: ${listed(missing)}`);
  if (unexpected.length > 0) problems.push(`${unexpected.length} unexpected tensor(s): ${listed(unexpected)}`);
  const misshapen: string[] = [];
  const wrongDtype: string[] = [];
  for (const t of schema.tensors) {
    const got = m.get(t.name);
    if (!got) continue;
    const expected = t.shape.slice();
    if (t.classAxis !== undefined) expected[t.classAxis] = numClasses ?? schema.numClasses;
    if (got.shape.length !== expected.length || got.shape.some((d, i) => d !== expected[i])) misshapen.push(`${t.name} is ${JSON.stringify(got.shape)}, expected ${JSON.stringify(expected)}`);
    if (got.dtype !== schema.dtype) wrongDtype.push(`${t.name} is ${got.dtype}`);
  }
  if (misshapen.length > 0) problems.push(`${misshapen.length} misshapen tensor(s): ${listed(misshapen)}`);
  if (wrongDtype.length > 0) problems.push(`${wrongDtype.length} tensor(s) not ${schema.dtype}: ${listed(wrongDtype)}`);
  return { problems, numClasses, keyErrors: missing.length + unexpected.length, loose: loose * 1e6 - misshapen.length };
}

/** Identifies the variant of a safetensors header and names every problem against the closest variant. */
export function checkHeaderAgainstSchemas(header: SafetensorsHeader, schemas: CheckpointSchema[] = loadSchemas()): SchemaCheck {
  const mapped = mapNames(header);
  const base = { layout: mapped.layout, tensorCount: header.tensors.size };
  if (mapped.problems.length > 0) return { ...base, variant: null, numClasses: null, problems: [...mapped.problems, supportedText()] };
  const kind = unsupportedKind(mapped.tensors, header);
  if (kind) return { ...base, variant: null, numClasses: null, problems: [`${kind}. ${supportedText()}`] };
  const fits = schemas.map((s) => ({ s, ...fitProblems(s, mapped.tensors) }));
  const exact = fits.find((f) => f.problems.length === 0);
  if (exact) return { ...base, variant: exact.s.variant, numClasses: exact.numClasses, problems: [] };
  let close = fits[0]!;
  for (const f of fits) if (f.loose > close.loose || (f.loose === close.loose && f.keyErrors < close.keyErrors)) close = f;
  return {
    ...base, variant: close.s.variant, numClasses: close.numClasses,
    problems: [`not an RF-DETR checkpoint of a supported variant; the closest is ${close.s.model} (${close.s.file}, ${close.s.tensors.length} tensors):`, ...close.problems, supportedText()],
  };
}

/** The config.json fields that name a variant, and the value the variant has. */
export function variantConfigFields(s: CheckpointSchema): [string, unknown][] {
  const a = s.architecture;
  return [
    ['rfdetr.config_class', s.configClass], ['rfdetr.encoder', a.encoder], ['rfdetr.resolution', a.resolution],
    ['rfdetr.patch_size', a.patch_size], ['rfdetr.num_windows', a.num_windows], ['rfdetr.positional_encoding_size', a.pos_grid],
    ['rfdetr.out_feature_indexes', a.out_feature_indexes], ['rfdetr.projector_scale', a.projector_scale], ['rfdetr.dec_layers', a.dec_layers],
    ['image_size', a.resolution], ['backbone_config.num_windows', a.num_windows], ['backbone_config.out_indices', a.out_feature_indexes],
    ['num_feature_levels', a.projector_scale.length],
    // Seg: the head's presence and mask stride (the C++ loader also checks intermediate_size and architectures).
    ['rfdetr.segmentation_head', a.task === 'segment'],
    ...(a.task === 'segment' ? [['rfdetr.mask_downsample_ratio', a.mask_downsample], ['mask_downsample_ratio', a.mask_downsample]] as [string, unknown][] : []),
  ];
}
