// The synthetic generator's rule table (fixtures rfdetr-seg/GENERATOR.md §2: the family table with `norm_in` in
// NORM) and the derivation of a Seg variant that has no fixture (XLarge, 2XLarge) from one that has: the
// tensor list in upstream state_dict order with (rule, A, S) per key. make-variant-schemas.ts checks the table
// against every fixture schema before it uses it for a variant without one.
export interface RuledTensor { name: string; shape: number[]; rule: string; A: number; S: number }

const NORM = String.raw`(norm[123]?|norm_in|layernorm|enc_output_norm\.\d+|\.bn|projector\.stages\.\d+\.1)`;

// [rule, key regex, A, S as a number or as the G of fanin(G)]
const RULES: [string, RegExp, number, number | { fanin: number }][] = [
  ['cls_token', /\.embeddings\.cls_token$/, 0, 2 ** -1],
  ['mask_token', /\.embeddings\.mask_token$/, 0, 2 ** -5],
  ['pos_embed', /\.embeddings\.position_embeddings$/, 0, 2 ** -2],
  ['layer_scale', /\.layer_scale[12]\.lambda1$/, 2 ** -1, 2 ** -2],
  ['norm_weight', new RegExp(`${NORM}\\.weight$`), 1, 2 ** -3],
  ['norm_bias', new RegExp(`${NORM}\\.bias$`), 0, 2 ** -5],
  ['vit_qk_weight', /\.attention\.attention\.(query|key)\.weight$/, 0, { fanin: 2 }],
  ['class_weight', /(^class_embed|enc_out_class_embed\.\d+)\.weight$/, 0, { fanin: 4 }],
  ['class_bias', /(^class_embed|enc_out_class_embed\.\d+)\.bias$/, -6.5, 2 ** -2],
  ['enc_box_out_weight', /enc_out_bbox_embed\.\d+\.layers\.2\.weight$/, 0, { fanin: 8 }],
  ['box_out_weight', /^bbox_embed\.layers\.2\.weight$/, 0, { fanin: 2 }],
  ['enc_box_out_bias', /enc_out_bbox_embed\.\d+\.layers\.2\.bias$/, 1, 2 ** -2],
  ['box_out_bias', /^bbox_embed\.layers\.2\.bias$/, 0, 2 ** -2],
  ['offsets_bias', /\.cross_attn\.sampling_offsets\.bias$/, 0, 2],
  ['refpoint_embed', /^refpoint_embed\.weight$/, 0, 2 ** -1],
  ['query_feat', /^query_feat\.weight$/, 0, 1],
  ['in_proj_weight', /\.in_proj_weight$/, 0, { fanin: 1 }],
  ['in_proj_bias', /\.in_proj_bias$/, 0, 2 ** -5],
  ['weight_matrix', /\.weight$/, 0, { fanin: 1 }],
  ['bias', /\.bias$/, 0, 2 ** -5],
];

/** The (rule, A, S) of one key: the first matching rule; fanin(G) = G·2^-e, e the largest with 4^e ≤ 2·fan_in. */
export function ruleFor(name: string, shape: number[]): RuledTensor {
  const hit = RULES.find(([, re]) => re.test(name));
  if (!hit) throw new Error(`${name}: no generator rule matches`);
  const [rule, , A, s] = hit;
  if (typeof s === 'number') return { name, shape, rule, A, S: s };
  if (shape.length < 2) throw new Error(`${name} ${JSON.stringify(shape)}: the fanin rule ${rule} needs a >= 2-D tensor`);
  const fanIn = shape.slice(1).reduce((a, b) => a * b, 1);
  let e = 0;
  while (4 ** (e + 1) <= 2 * fanIn) e++;
  return { name, shape, rule, A, S: s.fanin * 2 ** -e };
}

export interface SegGeometry { resolution: number; patch: number; queries: number; groups: number; decLayers: number }

/**
 * A Seg variant's tensors from another Seg variant's (`from`, with `fromLayers` decoder layers): decoder layers
 * and head blocks repeated or dropped to `to.decLayers` (the last one's keys renumbered, in its place in the
 * order), the position embeddings sized to the patch grid, query_feat/refpoint_embed to queries × groups;
 * every (rule, A, S) recomputed by ruleFor.
 */
export function deriveSeg(from: RuledTensor[], fromLayers: number, to: SegGeometry): RuledTensor[] {
  const grid = to.resolution / to.patch;
  if (!Number.isInteger(grid)) throw new Error(`resolution ${to.resolution} is not a multiple of patch ${to.patch}`);
  const perLayer = [/^(transformer\.decoder\.layers\.)(\d+)(\..*)$/, /^(segmentation_head\.blocks\.)(\d+)(\..*)$/];
  const out: RuledTensor[] = [];
  for (let i = 0; i < from.length; i++) {
    const t = from[i]!;
    const re = perLayer.find((r) => r.test(t.name));
    if (re) {
      const m = re.exec(t.name)!;
      const n = Number(m[2]);
      if (n >= to.decLayers) continue;
      out.push({ ...t, shape: [...t.shape] });
      const next = from[i + 1];
      const lastOfLayer = !next || !re.test(next.name) || Number(re.exec(next.name)![2]) !== n;
      if (lastOfLayer && n === fromLayers - 1) {
        for (let extra = fromLayers; extra < to.decLayers; extra++) {
          const group = from.filter((u) => { const mm = re.exec(u.name); return mm && Number(mm[2]) === n; });
          for (const u of group) out.push({ ...u, name: u.name.replace(re, `$1${extra}$3`), shape: [...u.shape] });
        }
      }
      continue;
    }
    const shape = [...t.shape];
    if (t.name.endsWith('.embeddings.position_embeddings')) shape[1] = grid * grid + 1;
    if (t.name.endsWith('.patch_embeddings.projection.weight')) shape[2] = shape[3] = to.patch;
    if (t.name === 'query_feat.weight' || t.name === 'refpoint_embed.weight') shape[0] = to.queries * to.groups;
    out.push({ ...t, shape });
  }
  return out.map((t) => ruleFor(t.name, t.shape));
}
