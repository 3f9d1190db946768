// Writes sidecar/schema/rfdetr-<variant>.json for the RF-DETR family from the shared fixtures
// (../shared/fixtures/rfdetr-family/<variant>/{schema.json,architecture.json,config.json}), in the layout of
// rfdetr-base.json: the tensors in upstream state_dict order with the synth rule (A, S) and the class axis, plus
// the architecture block the engines size themselves from and the config.json fields a synthetic checkpoint of
// the variant carries (its difference from coco-config.json). The base schema gets its architecture block here too.
// Usage: npx tsx scripts/make-variant-schemas.ts [FAMILY_FIXTURES_DIR]
import fs from 'node:fs';
import path from 'node:path';
import { cocoConfigPath, packageRoot } from '../src/config/paths.ts';

const family = process.argv[2] ?? path.resolve(packageRoot, '..', 'shared', 'fixtures', 'rfdetr-family');
const schemaDir = path.join(packageRoot, 'sidecar', 'schema');
const CLASS_AXIS = /(^class_embed|enc_out_class_embed\.\d+)\.(weight|bias)$/;

interface Arch {
  rfdetr_class: string; config_class: string; encoder: string; resolution: number; patch_size: number;
  num_windows: number; positional_encoding_size: number; vit_layers: number; vit_hidden: number; vit_heads: number;
  vit_mlp: number; out_feature_indexes: number[]; hidden_dim: number; projector_scale: string[]; dec_layers: number;
  sa_nheads: number; ca_nheads: number; dec_n_points: number; dim_feedforward: number; num_queries: number; group_detr: number;
}

function architecture(a: Arch): Record<string, unknown> {
  return {
    encoder: a.encoder, resolution: a.resolution, patch_size: a.patch_size, num_windows: a.num_windows,
    pos_grid: a.positional_encoding_size, vit_layers: a.vit_layers, vit_hidden: a.vit_hidden, vit_heads: a.vit_heads,
    vit_mlp: a.vit_mlp, out_feature_indexes: a.out_feature_indexes, d_model: a.hidden_dim,
    projector_scale: a.projector_scale, c2f_blocks: 3, dec_layers: a.dec_layers, sa_heads: a.sa_nheads,
    ca_heads: a.ca_nheads, dec_points: a.dec_n_points, ffn: a.dim_feedforward, num_queries: a.num_queries,
    group_detr: a.group_detr,
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

function write(variant: string, model: string, arch: Arch, tensors: { name: string; shape: number[]; rule: string; A: number; S: number }[], config: unknown): void {
  const head = header({
    _comment: `The ${model} checkpoint schema: its ${tensors.length} F32 tensors in upstream roboflow/rf-detr LWDETR state_dict order, with the synthetic-generator rule (A, S) of the rfdetr-family generator (fixtures GENERATOR.md) per tensor. class_axis marks the axis whose size is the class count. architecture is what the engines size themselves from; config is what a synthetic checkpoint's config.json carries beyond coco-config.json. Made by scripts/make-variant-schemas.ts from the shared fixtures; the C++ loader (embedded) and the TypeScript verifier read this file.`,
    variant, model, config_class: arch.config_class, dtype: 'F32', num_classes: 91, count: tensors.length,
    synth_spec: 'rfdetr-synth v1: k = seed ^ fnv1a64(key); x_i = splitmix64_mix(k + (i+1)*0x9E3779B97F4A7C15); value = f32(A + S*((x_i>>40)*2^-23 - 1))',
    architecture: architecture(arch), config: config ?? {},
  });
  const rows = tensors.map((t) => JSON.stringify({ name: t.name, shape: t.shape, rule: t.rule, A: t.A, S: t.S, ...(CLASS_AXIS.test(t.name) ? { class_axis: 0 } : {}) }));
  fs.writeFileSync(path.join(schemaDir, `rfdetr-${variant.replace('_', '-')}.json`), `${head},"tensors":[\n${rows.join(',\n')}\n]}\n`);
  console.log(`${variant}: ${tensors.length} tensors`);
}

const coco = JSON.parse(fs.readFileSync(cocoConfigPath, 'utf8')) as unknown;
const names: Record<string, string> = { nano: 'RF-DETR-Nano', small: 'RF-DETR-Small', medium: 'RF-DETR-Medium', large: 'RF-DETR-Large', large_deprecated: 'RF-DETR-LargeDeprecated' };
for (const [variant, model] of Object.entries(names)) {
  const dir = path.join(family, variant);
  const arch = JSON.parse(fs.readFileSync(path.join(dir, 'architecture.json'), 'utf8')) as Arch;
  const sch = JSON.parse(fs.readFileSync(path.join(dir, 'schema.json'), 'utf8')) as { tensors: { key: string; shape: number[]; rule: string; A: number; S: number }[] };
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')) as unknown;
  write(variant, model, arch, sch.tensors.map((t) => ({ name: t.key, shape: t.shape, rule: t.rule, A: t.A, S: t.S })), diff(coco, cfg));
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
