// Writes sidecar/schema/rfdetr-<variant>.json for the RF-DETR family from the shared fixtures
// (../shared/fixtures/rfdetr-family/<variant>/{schema.json,architecture.json,config.json}), in the layout of
// rfdetr-base.json: the tensors in upstream state_dict order with the synth rule (A, S) and the class axis, plus
// the architecture block the engines size themselves from and the config.json fields a synthetic checkpoint of
// the variant carries (its difference from coco-config.json). The base schema gets its architecture block here too.
// The RF-DETR Seg sizes come from ../shared/fixtures/rfdetr-seg/<size>/ the same way; SegXLarge and Seg2XLarge,
// which have no fixtures, are derived from SegLarge by upstream's config classes (synth-rules.ts deriveSeg), after
// the derivation and the rule table are checked to reproduce every fixture schema.
// Usage: npx tsx scripts/make-variant-schemas.ts [FAMILY_FIXTURES_DIR [SEG_FIXTURES_DIR]]
import fs from 'node:fs';
import path from 'node:path';
import { cocoConfigPath, packageRoot } from '../src/config/paths.ts';
import { deriveSeg, ruleFor, type RuledTensor } from './synth-rules.ts';

const family = process.argv[2] ?? path.resolve(packageRoot, '..', 'shared', 'fixtures', 'rfdetr-family');
const segFixtures = process.argv[3] ?? path.resolve(packageRoot, '..', 'shared', 'fixtures', 'rfdetr-seg');
const schemaDir = path.join(packageRoot, 'sidecar', 'schema');
const CLASS_AXIS = /(^class_embed|enc_out_class_embed\.\d+)\.(weight|bias)$/;

interface Arch {
  rfdetr_class: string; config_class: string; encoder: string; resolution: number; patch_size: number;
  num_windows: number; positional_encoding_size: number; vit_layers: number; vit_hidden: number; vit_heads: number;
  vit_mlp: number; out_feature_indexes: number[]; hidden_dim: number; projector_scale: string[]; dec_layers: number;
  sa_nheads: number; ca_nheads: number; dec_n_points: number; dim_feedforward: number; num_queries: number; group_detr: number;
  segmentation_head?: boolean; mask_downsample_ratio?: number;
}

// task: "detect" | "segment". A segment variant adds mask_downsample (the mask logits' side is resolution /
// mask_downsample) and mask_blocks (segmentation_head.blocks.N, one per decoder layer).
function architecture(a: Arch): Record<string, unknown> {
  const seg = a.segmentation_head === true;
  return {
    task: seg ? 'segment' : 'detect',
    encoder: a.encoder, resolution: a.resolution, patch_size: a.patch_size, num_windows: a.num_windows,
    pos_grid: a.positional_encoding_size, vit_layers: a.vit_layers, vit_hidden: a.vit_hidden, vit_heads: a.vit_heads,
    vit_mlp: a.vit_mlp, out_feature_indexes: a.out_feature_indexes, d_model: a.hidden_dim,
    projector_scale: a.projector_scale, c2f_blocks: 3, dec_layers: a.dec_layers, sa_heads: a.sa_nheads,
    ca_heads: a.ca_nheads, dec_points: a.dec_n_points, ffn: a.dim_feedforward, num_queries: a.num_queries,
    group_detr: a.group_detr,
    ...(seg ? { mask_downsample: a.mask_downsample_ratio, mask_blocks: a.dec_layers } : {}),
  };
}

// The fields of `b` that differ from `a` (objects recursively; arrays and scalars whole).
function diff(a: unknown, b: unknown): unknown {
  if (typeof a === 'object' && a && !Array.isArray(a) && typeof b === 'object' && b && !Array.isArray(b)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(b as Record<string, unknown>)) {
      if (['_comment', 'id2label', 'label2id'].includes(k)) continue;
      const d = diff((a as Record<string, unknown>)[k], v);
      if (d !== undefined) out[k] = d;
    }
    return Object.keys(out).length ? out : undefined;
  }
  return JSON.stringify(a) === JSON.stringify(b) ? undefined : b;
}

function header(fields: Record<string, unknown>): string {
  return JSON.stringify(fields).slice(0, -1);
}

function write(variant: string, model: string, arch: Arch, tensors: { name: string; shape: number[]; rule: string; A: number; S: number }[], config: unknown, provenance = ''): void {
  const head = header({
    _comment: `The ${model} checkpoint schema: its ${tensors.length} F32 tensors in upstream roboflow/rf-detr LWDETR state_dict order, with the synthetic-generator rule (A, S) of the rfdetr-family generator (fixtures GENERATOR.md; the rfdetr-seg generator adds norm_in to NORM) per tensor.${provenance} class_axis marks the axis whose size is the class count. architecture is what the engines size themselves from; config is what a synthetic checkpoint's config.json carries beyond coco-config.json. Made by scripts/make-variant-schemas.ts from the shared fixtures; the C++ loader (embedded) and the TypeScript verifier read this file.`,
    variant, model, config_class: arch.config_class, dtype: 'F32', num_classes: 91, count: tensors.length,
    synth_spec: 'rfdetr-synth v1: k = seed ^ fnv1a64(key); x_i = splitmix64_mix(k + (i+1)*0x9E3779B97F4A7C15); value = f32(A + S*((x_i>>40)*2^-23 - 1))',
    architecture: architecture(arch), config: config ?? {},
  });
  const rows = tensors.map((t) => JSON.stringify({ name: t.name, shape: t.shape, rule: t.rule, A: t.A, S: t.S, ...(CLASS_AXIS.test(t.name) ? { class_axis: 0 } : {}) }));
  fs.writeFileSync(path.join(schemaDir, `rfdetr-${variant.replaceAll('_', '-')}.json`), `${head},"tensors":[\n${rows.join(',\n')}\n]}\n`);
  console.log(`${variant}: ${tensors.length} tensors`);
}

// A fixture's schema.json tensors, each checked against the rule table (so the table is right before it makes
// the variants that have no fixture).
function fixtureTensors(dir: string): RuledTensor[] {
  const sch = JSON.parse(fs.readFileSync(path.join(dir, 'schema.json'), 'utf8')) as { tensors: { key: string; shape: number[]; rule: string; A: number; S: number }[] };
  return sch.tensors.map((t) => {
    const r = ruleFor(t.key, t.shape);
    if (r.rule !== t.rule || r.A !== t.A || r.S !== t.S) throw new Error(`${dir}: ${t.key}: the rule table gives ${r.rule} (${r.A}, ${r.S}), the fixture ${t.rule} (${t.A}, ${t.S})`);
    return { name: t.key, shape: t.shape, rule: t.rule, A: t.A, S: t.S };
  });
}

const coco = JSON.parse(fs.readFileSync(cocoConfigPath, 'utf8')) as unknown;
const names: Record<string, string> = { nano: 'RF-DETR-Nano', small: 'RF-DETR-Small', medium: 'RF-DETR-Medium', large: 'RF-DETR-Large', large_deprecated: 'RF-DETR-LargeDeprecated' };
for (const [variant, model] of Object.entries(names)) {
  const dir = path.join(family, variant);
  const arch = JSON.parse(fs.readFileSync(path.join(dir, 'architecture.json'), 'utf8')) as Arch;
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')) as unknown;
  const tensors = fixtureTensors(dir);
  write(variant, model, arch, tensors, diff(coco, cfg));
}
// Base: the tensors stay as they are; the architecture is RFDETRBaseConfig's (MODEL.md).
const basePath = path.join(schemaDir, 'rfdetr-base.json');
const base = JSON.parse(fs.readFileSync(basePath, 'utf8')) as { tensors: { name: string; shape: number[]; rule: string; A: number; S: number }[] };
write('base', 'RF-DETR-base', {
  rfdetr_class: 'RFDETRBase', config_class: 'RFDETRBaseConfig', encoder: 'dinov2_windowed_small', resolution: 560, patch_size: 14,
  num_windows: 4, positional_encoding_size: 37, vit_layers: 12, vit_hidden: 384, vit_heads: 6, vit_mlp: 1536,
  out_feature_indexes: [2, 5, 8, 11], hidden_dim: 256, projector_scale: ['P4'], dec_layers: 3, sa_nheads: 8, ca_nheads: 16,
  dec_n_points: 2, dim_feedforward: 2048, num_queries: 300, group_detr: 13,
}, base.tensors, {});

// RF-DETR Seg. The fixture sizes as they are; XLarge and 2XLarge from SegLarge by upstream rfdetr's
// RFDETRSegXLargeConfig / RFDETRSeg2XLargeConfig (resolution 624 / 768, patch 12, 2 windows, 6 decoder layers,
// 300 queries and num_select; everything else RFDETRBaseConfig's, as for the fixture sizes).
const segNames: Record<string, string> = { nano: 'Nano', small: 'Small', medium: 'Medium', large: 'Large' };
const seg: Record<string, { arch: Arch; tensors: RuledTensor[]; cfg: Record<string, unknown> }> = {};
for (const [size, title] of Object.entries(segNames)) {
  const dir = path.join(segFixtures, size);
  const arch = JSON.parse(fs.readFileSync(path.join(dir, 'architecture.json'), 'utf8')) as Arch;
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  seg[size] = { arch, tensors: fixtureTensors(dir), cfg };
  write(`seg-${size}`, `RF-DETR-Seg-${title}`, arch, seg[size].tensors, diff(coco, cfg));
}
// The derivation must rebuild every fixture size from every other one before it is trusted for XL/2XL.
for (const [a, fa] of Object.entries(seg)) {
  for (const [b, fb] of Object.entries(seg)) {
    const got = deriveSeg(fa.tensors, fa.arch.dec_layers, { resolution: fb.arch.resolution, patch: fb.arch.patch_size, queries: fb.arch.num_queries, groups: fb.arch.group_detr, decLayers: fb.arch.dec_layers });
    if (JSON.stringify(got) !== JSON.stringify(fb.tensors)) throw new Error(`deriveSeg(${a} -> ${b}) does not reproduce the ${b} fixture schema`);
  }
}
const large = seg.large!;
for (const [size, title, resolution, weights] of [['xlarge', 'XLarge', 624, 'rf-detr-seg-xlarge.pt'], ['2xlarge', '2XLarge', 768, 'rf-detr-seg-xxlarge.pt']] as const) {
  const configClass = `RFDETRSeg${title}Config`;
  const grid = resolution / 12;
  const arch: Arch = { ...large.arch, rfdetr_class: `RFDETRSeg${title}`, config_class: configClass, resolution, positional_encoding_size: grid, dec_layers: 6, num_queries: 300 };
  const tensors = deriveSeg(large.tensors, large.arch.dec_layers, { resolution, patch: 12, queries: 300, groups: arch.group_detr, decLayers: 6 });
  const cfg = structuredClone(large.cfg) as Record<string, any>;
  Object.assign(cfg, { image_size: resolution, decoder_layers: 6, num_queries: 300 });
  cfg.backbone_config.image_size = resolution;
  Object.assign(cfg.rfdetr, { resolution, positional_encoding_size: grid, dec_layers: 6, num_queries: 300, num_select: 300, config_class: configClass, pretrain_weights_name: weights });
  write(`seg-${size}`, `RF-DETR-Seg-${title}`, arch, tensors, diff(coco, cfg),
    ` No fixture exists for this size: the tensors are SegLarge's fixture schema with 6 decoder layers and head blocks, a ${grid}x${grid} position-embedding grid and 300 queries (upstream ${configClass}), rules by the generator table.`);
}
