// Schema and config checks against the family's schemas (sidecar/schema/rfdetr-<variant>.json), on schema-shaped
// sparse checkpoints (a real header; zero data that costs no memory), plus hash checks of Hub cache blobs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { assertValidWeights, checkConfig, loadSchema, loadSchemas, verifyWeights } from '../../src/weights/verify.ts';
import { isRfdetrError } from '../../src/errors.ts';
import { configJson, tinySafetensors, tmpDir, writeSchemaShaped, writeValidCheckpoint } from './checkpoints.ts';
import { gitBlobSha1, sha256 } from './fake-hub.ts';

let root: string;
before(() => {
  root = tmpDir('verify');
});
after(() => fs.rmSync(root, { recursive: true, force: true }));

function dirWith(name: string, opts: Parameters<typeof writeSchemaShaped>[1], config: Buffer = configJson(opts?.numClasses ?? 91)): { model: string; config: string } {
  const d = path.join(root, name);
  const model = writeSchemaShaped(d, opts);
  fs.writeFileSync(path.join(d, 'config.json'), config);
  return { model, config: path.join(d, 'config.json') };
}

test('verify: the schema file is the one the C++ loader reads: 487 F32 tensors, 28 class axes, 91 classes', () => {
  const s = loadSchema();
  assert.equal(s.tensors.length, 487);
  assert.equal(s.dtype, 'F32');
  assert.equal(s.numClasses, 91);
  assert.equal(s.tensors.filter((t) => t.classAxis !== undefined).length, 28);
  assert.ok(s.file.endsWith(path.join('sidecar', 'schema', 'rfdetr-base.json')));
});

test('verify: a schema-shaped checkpoint with a COCO-91 config passes', async () => {
  const files = writeValidCheckpoint(path.join(root, 'ok'));
  const v = await verifyWeights(files, { hashes: false });
  assert.deepEqual(v.problems, []);
  assert.equal(v.ok, true);
  assert.equal(v.model.tensors, 487);
  assert.equal(v.model.numClasses, 91);
  assert.equal(v.model.bytes, fs.statSync(files.model).size);
  assert.ok(v.model.bytes > 128_698_120, 'data section is the full 32,174,530 f32 values');
  assert.equal(v.config.labels, 91);
});

test('verify: missing, unexpected, misshapen and wrongly typed tensors are each named', async () => {
  const files = dirWith('bad', {
    drop: ['refpoint_embed.weight', 'class_embed.bias'],
    add: { 'extra.head.weight': [2, 2] },
    reshape: { 'query_feat.weight': [3900, 255] },
    dtype: { 'transformer.decoder.layers.0.norm1.bias': 'F16' },
  });
  const v = await verifyWeights(files, { hashes: false });
  assert.equal(v.ok, false);
  const text = v.problems.join('\n');
  assert.match(text, /2 tensor\(s\) missing: (transformer\.\S+, )*(refpoint_embed\.weight, class_embed\.bias|class_embed\.bias, refpoint_embed\.weight)/);
  assert.match(text, /1 unexpected tensor\(s\): extra\.head\.weight/);
  assert.match(text, /1 misshapen tensor\(s\): query_feat\.weight is \[3900,255\], expected \[3900,256\]/);
  assert.match(text, /1 tensor\(s\) not F32: transformer\.decoder\.layers\.0\.norm1\.bias is F16/);
  assert.ok(v.problems.every((p) => p.startsWith(files.model)), 'each problem names the file');
  await assert.rejects(assertValidWeights(files, { hashes: false }), (e: unknown) => isRfdetrError(e, 'E_WEIGHTS_INVALID') && /query_feat\.weight is \[3900,255\]/.test(e.message));
});

test('verify: class axes take the count from class_embed.weight rows (a fine-tuned 80-class checkpoint passes)', async () => {
  const ok = dirWith('c80', { numClasses: 80 });
  const v = await verifyWeights(ok, { hashes: false });
  assert.deepEqual(v.problems, []);
  assert.equal(v.model.numClasses, 80);
  // One class axis disagreeing with class_embed.weight is misshapen.
  const mixed = dirWith('mixed', { numClasses: 80, reshape: { 'transformer.enc_out_class_embed.3.bias': [91] } });
  const m = await verifyWeights(mixed, { hashes: false });
  assert.match(m.problems.join('\n'), /transformer\.enc_out_class_embed\.3\.bias is \[91\], expected \[80\]/);
});

test('verify: config.json must carry id2label agreeing with the class count', async () => {
  const wrongCount = dirWith('cfg91', { numClasses: 80 }, configJson(91));
  const v = await verifyWeights(wrongCount, { hashes: false });
  assert.deepEqual(v.problems, [
    `${wrongCount.config}: config.json id2label has 91 labels but the checkpoint has 80 classes (class_embed.weight rows)`,
    `${wrongCount.config}: config.json id2label ids 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90 are outside 0..79`,
  ]);
  const none = dirWith('cfgnone', {}, Buffer.from('{"model_type": "rf_detr"}'));
  assert.match((await verifyWeights(none, { hashes: false })).problems.join(), /config\.json has no id2label object/);
  const broken = dirWith('cfgbroken', {}, Buffer.from('{"id2label": '));
  assert.match((await verifyWeights(broken, { hashes: false })).problems.join(), /config\.json: not valid JSON/);
  assert.deepEqual(checkConfig({ id2label: { 0: 'a', 1: 'b', x: 'c' } }, 3), ['config.json id2label has non-integer keys: "x"']);
  assert.deepEqual(checkConfig({ id2label: { 0: 'a', 5: 'b' } }, 2), ['config.json id2label ids 5 are outside 0..1']);
  assert.deepEqual(checkConfig({ id2label: { 0: 'a', 1: 'b' }, num_labels: 3 }, 2), ['config.json num_labels is 3 but the checkpoint has 2 classes']);
  assert.deepEqual(checkConfig(JSON.parse(fs.readFileSync(wrongCount.config, 'utf8')), 91), []);
});

test('verify: the reconstructed COCO-91 config shipped with the schema passes', async () => {
  const { cocoConfigPath } = await import('../../src/config/paths.ts');
  assert.deepEqual(checkConfig(JSON.parse(fs.readFileSync(cocoConfigPath, 'utf8')), 91), []);
});

test('verify: a truncated or non-safetensors model is reported, not thrown', async () => {
  const d = path.join(root, 'trunc');
  const files = writeValidCheckpoint(d);
  fs.truncateSync(files.model, 1000);
  const v = await verifyWeights(files, { hashes: false });
  assert.equal(v.ok, false);
  assert.match(v.problems.join(), /not a valid safetensors file: header length \d+ runs past the end of the 1000-byte file/);
  const gone = await verifyWeights({ model: path.join(root, 'nope.safetensors'), config: files.config }, { hashes: false });
  assert.match(gone.problems.join(), /nope\.safetensors: ENOENT/);
});

test('verify: files in the Hub cache are hashed against their blob etag', async () => {
  const repo = path.join(root, 'cache', 'models--Roboflow--rf-detr-base');
  const snap = path.join(repo, 'snapshots', '7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a');
  fs.mkdirSync(path.join(repo, 'blobs'), { recursive: true });
  fs.mkdirSync(snap, { recursive: true });
  const model = tinySafetensors();
  const config = configJson();
  fs.writeFileSync(path.join(repo, 'blobs', sha256(model)), model);
  fs.writeFileSync(path.join(repo, 'blobs', gitBlobSha1(config)), config);
  fs.symlinkSync(`../../blobs/${sha256(model)}`, path.join(snap, 'model.safetensors'));
  fs.symlinkSync(`../../blobs/${gitBlobSha1(config)}`, path.join(snap, 'config.json'));
  const files = { model: path.join(snap, 'model.safetensors'), config: path.join(snap, 'config.json') };
  const v = await verifyWeights(files);
  assert.equal(v.model.hash?.against, 'etag');
  assert.equal(v.model.hash?.kind, 'sha256');
  assert.equal(v.model.hash?.ok, true);
  assert.equal(v.config.hash?.kind, 'git-sha1');
  assert.equal(v.config.hash?.ok, true);
  // Flip a byte in the model blob: the hash check names it (the tiny model also fails the schema, separately).
  const blob = path.join(repo, 'blobs', sha256(model));
  const bad = Buffer.from(model);
  bad[bad.length - 1] = bad[bad.length - 1]! ^ 1;
  fs.writeFileSync(blob, bad);
  const w = await verifyWeights(files);
  assert.equal(w.model.hash?.ok, false);
  assert.match(w.problems.join('\n'), new RegExp(`model\\.safetensors: content sha256 ${sha256(bad)} does not match its cache etag ${sha256(model)}`));
  // A plain directory has no reference hash: its sha256 is reported, with ok = null.
  const plain = writeValidCheckpoint(path.join(root, 'plain'), 91);
  fs.writeFileSync(plain.model, model);
  const p = await verifyWeights(plain);
  assert.equal(p.model.hash?.against, 'none');
  assert.equal(p.model.hash?.actual, sha256(model));
  assert.equal(p.model.hash?.ok, null);
});

test('verify: every family variant is identified from its shapes, with any class count', async () => {
  assert.deepEqual(loadSchemas().map((s) => `${s.variant}:${s.tensors.length}`), ['base:487', 'nano:465', 'small:487', 'medium:509', 'large:509', 'large_deprecated:533',
    'seg-nano:544', 'seg-small:544', 'seg-medium:572', 'seg-large:572', 'seg-xlarge:600', 'seg-2xlarge:600']);
  for (const variant of ['nano', 'small', 'medium', 'large', 'large_deprecated', 'seg-nano', 'seg-small', 'seg-medium', 'seg-large', 'seg-xlarge', 'seg-2xlarge']) {
    for (const n of [91, 3]) {
      const files = dirWith(`v-${variant}-${n}`, { variant, numClasses: n }, configJson(n, { rfdetr: { config_class: loadSchemas().find((s) => s.variant === variant)!.configClass } }));
      const v = await verifyWeights(files, { hashes: false });
      assert.deepEqual(v.problems, [], `${variant} ${n}`);
      assert.equal(v.model.variant, variant);
      assert.equal(v.model.numClasses, n);
      assert.ok(v.schema.endsWith(`rfdetr-${variant.replace('_', '-')}.json`));
      assert.equal(loadSchemas().find((s) => s.variant === variant)!.architecture.task, variant.startsWith('seg-') ? 'segment' : 'detect');
    }
  }
  // A config.json that names another variant is named against the one the shapes say.
  const other = dirWith('v-other', { variant: 'nano' }, configJson(91, { image_size: 560 }));
  assert.deepEqual((await verifyWeights(other, { hashes: false })).problems,
    [`${other.config}: config.json field image_size is 560 but the checkpoint's tensors are RF-DETR-Nano (RFDETRNanoConfig), whose image_size is 384`]);
});

// Upstream -> transformers' RfDetrForObjectDetection names (independent of transformers-keys.json), with the decoder
// self-attention's in_proj split into q/k/v by the caller.
function nativeName(n: string): string {
  return n
    .replace(/^backbone\.0\.encoder\.encoder\./, 'model.backbone.backbone.')
    .replace(/\.attention\.attention\.query\./, '.attention.q_proj.')
    .replace(/^backbone\.0\.projector\.stages\.(\d+)\.0\.cv(\d)\.conv\./, 'model.backbone.projector.scale_layers.$1.projector_layer.conv$2.conv.')
    .replace(/^backbone\.0\.projector\.stages\.(\d+)\.0\.cv(\d)\.bn\./, 'model.backbone.projector.scale_layers.$1.projector_layer.conv$2.norm.')
    .replace(/^backbone\.0\.projector\.stages\.(\d+)\.0\.m\.(\d+)\.cv(\d)\.conv\./, 'model.backbone.projector.scale_layers.$1.projector_layer.bottlenecks.$2.conv$3.conv.')
    .replace(/^backbone\.0\.projector\.stages\.(\d+)\.0\.m\.(\d+)\.cv(\d)\.bn\./, 'model.backbone.projector.scale_layers.$1.projector_layer.bottlenecks.$2.conv$3.norm.')
    .replace(/^backbone\.0\.projector\.stages\.(\d+)\.1\./, 'model.backbone.projector.scale_layers.$1.layer_norm.')
    .replace(/^transformer\.decoder\.layers\.(\d+)\.norm1\./, 'model.decoder.layers.$1.self_attn_layer_norm.')
    .replace(/^transformer\.decoder\.layers\.(\d+)\.norm2\./, 'model.decoder.layers.$1.cross_attn_layer_norm.')
    .replace(/^transformer\.decoder\.layers\.(\d+)\.norm3\./, 'model.decoder.layers.$1.layer_norm.')
    .replace(/^transformer\.decoder\.layers\.(\d+)\.linear(\d)\./, 'model.decoder.layers.$1.mlp.fc$2.')
    .replace(/^transformer\.decoder\.layers\.(\d+)\.self_attn\.out_proj\./, 'model.decoder.layers.$1.self_attn.o_proj.')
    .replace(/^transformer\.decoder\.norm\./, 'model.decoder.layernorm.')
    .replace(/^transformer\./, 'model.')
    .replace(/^refpoint_embed\./, 'model.reference_point_embed.')
    .replace(/^query_feat\./, 'model.query_feat.');
}

test("verify: transformers' native key names (split q/k/v) verify as the same variant; a missing part is named", async () => {
  const split: Record<string, number[]> = {};
  const drop: string[] = [];
  for (let l = 0; l < 2; l++) {
    for (const [kind, shape] of [['weight', [256, 256]], ['bias', [256]]] as const) {
      drop.push(`transformer.decoder.layers.${l}.self_attn.in_proj_${kind}`);
      for (const p of ['q', 'k', 'v']) split[`model.decoder.layers.${l}.self_attn.${p}_proj.${kind}`] = [...shape];
    }
  }
  const files = dirWith('native', { variant: 'nano', drop, rename: (n) => (n.startsWith('model.decoder') ? n : nativeName(n)) }, configJson(91));
  // The split parts are added after renaming (their names are already native).
  const d = path.dirname(files.model);
  writeSchemaShaped(d, { variant: 'nano', drop, add: split, rename: (n) => (n.startsWith('model.decoder.layers') && /_proj\.(weight|bias)$/.test(n) && !n.includes('o_proj') ? n : nativeName(n)) });
  const v = await verifyWeights(files, { hashes: false });
  assert.deepEqual(v.problems, []);
  assert.equal(v.model.variant, 'nano');
  assert.equal(v.model.layout, 'transformers');
  delete split['model.decoder.layers.1.self_attn.k_proj.weight'];
  writeSchemaShaped(d, { variant: 'nano', drop, add: split, rename: (n) => (n.startsWith('model.decoder.layers') && /_proj\.(weight|bias)$/.test(n) && !n.includes('o_proj') ? n : nativeName(n)) });
  const bad = await verifyWeights(files, { hashes: false });
  assert.match(bad.problems.join('\n'), /transformer\.decoder\.layers\.1\.self_attn\.in_proj_weight is made of the split q\/k\/v tensors, but its k part\(s\) are missing/);
});

test('verify: Seg head tensors are checked strictly; a Seg config.json contradicting the head is named', async () => {
  // One head tensor on Nano's detection tensors: neither Nano nor a Seg size (a Seg size is closer by one name).
  const extra = await verifyWeights(dirWith('seg-extra', { variant: 'nano', add: { 'segmentation_head.bias': [1] } }), { hashes: false });
  assert.match(extra.problems.join('\n'), /not an RF-DETR checkpoint of a supported variant; the closest is RF-DETR-Seg-\w+ .*\n.*\d+ tensor\(s\) missing: transformer\.decoder\.layers\.2\./);
  const missing = await verifyWeights(dirWith('seg-missing', { variant: 'seg-medium', drop: ['segmentation_head.blocks.4.norm.bias'] }), { hashes: false });
  assert.match(missing.problems.join('\n'), /the closest is RF-DETR-Seg-Medium .*\n.*: 1 tensor\(s\) missing: segmentation_head\.blocks\.4\.norm\.bias\n/);
  const ratio = dirWith('seg-ratio', { variant: 'seg-small' }, configJson(91, { rfdetr: { config_class: 'RFDETRSegSmallConfig' }, mask_downsample_ratio: 8 }));
  assert.deepEqual((await verifyWeights(ratio, { hashes: false })).problems,
    [`${ratio.config}: config.json field mask_downsample_ratio is 8 but the checkpoint's tensors are RF-DETR-Seg-Small (RFDETRSegSmallConfig), whose mask_downsample_ratio is 4`]);
});

test('verify: unsupported kinds are refused by name with what is supported', async () => {
  const p12 = dirWith('p12', { variant: 'nano', reshape: { 'backbone.0.encoder.encoder.embeddings.patch_embeddings.projection.weight': [384, 3, 12, 12] } });
  const v = await verifyWeights(p12, { hashes: false });
  assert.match(v.problems.join('\n'), /a patch-12 DINOv2 backbone without segmentation_head\.\* tensors.*Supported: RF-DETR detection and segmentation \(Seg\) checkpoints of the variants base \(RF-DETR-base\), nano .*seg-2xlarge \(RF-DETR-Seg-2XLarge\)/);
  const native = dirWith('seg-native', { variant: 'seg-nano', rename: (n) => nativeName(n) });
  assert.match((await verifyWeights(native, { hashes: false })).problems.join('\n'), /transformers key names with a segmentation head \(segmentation_head\..*RF-DETR Seg checkpoints are read only with upstream rfdetr key names/);
  const vitb = dirWith('vitb', { reshape: { 'backbone.0.encoder.encoder.embeddings.cls_token': [1, 1, 768] } });
  assert.match((await verifyWeights(vitb, { hashes: false })).problems.join('\n'), /XLarge\/2XLarge \(rfdetr_plus\)/);
});
