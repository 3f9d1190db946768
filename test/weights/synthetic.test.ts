// Synthetic checkpoints are flagged after creation: resolveWeights reads the marks rfdetr-synth writes
// (config.json "synthetic": true, safetensors __metadata__ synthetic "true"), and every command says so.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { testFixturesDir } from '../../src/config/paths.ts';
import { resolveWeights } from '../../src/weights/resolve.ts';
import { serverHasSyntheticWeights } from '../../src/weights/synthetic.ts';
import { encodeSafetensors } from '../../src/weights/safetensors.ts';
import { synthWeights } from '../helpers/synth-weights.ts';
import { replayServer, runInProcess } from '../cli/helpers.ts';
import { configJson, tinySafetensors, tmpDir } from './checkpoints.ts';

function dirWith(model: Buffer, config: Buffer): string {
  const dir = tmpDir('synthmark');
  fs.writeFileSync(path.join(dir, 'model.safetensors'), model);
  fs.writeFileSync(path.join(dir, 'config.json'), config);
  return dir;
}

test('resolveWeights: synthetic from rfdetr-synth output (with its seed), from either mark alone, and not for plain files', async () => {
  const synth = await resolveWeights({ weightsDir: await synthWeights(), env: {} });
  assert.equal(synth.synthetic, true);
  assert.equal(synth.syntheticSeed, '0x1');
  const plain = await resolveWeights({ weightsDir: dirWith(tinySafetensors(), configJson(91)), env: {} });
  assert.equal(plain.synthetic, false);
  assert.equal(plain.syntheticSeed, null);
  const cfgOnly = await resolveWeights({ weightsDir: dirWith(tinySafetensors(), configJson(91, { synthetic: true })), env: {} });
  assert.equal(cfgOnly.synthetic, true);
  const a = new Float32Array(4);
  const meta = encodeSafetensors([{ name: 'w', dtype: 'F32', shape: [4], data: new Uint8Array(a.buffer) }], { format: 'pt', synthetic: 'true', seed: '0x7' });
  const metaOnly = await resolveWeights({ weightsDir: dirWith(meta, configJson(91)), env: {} });
  assert.deepEqual([metaOnly.synthetic, metaOnly.syntheticSeed], [true, '0x7']);
  const notTrue = await resolveWeights({ weightsDir: dirWith(tinySafetensors(), configJson(91, { synthetic: 'yes' })), env: {} });
  assert.equal(notTrue.synthetic, false, 'only the boolean true marks it');
});

test('CLI: detect, info and weights verify/where warn on stderr for synthetic weights; weights verify says it on stdout', async () => {
  const dir = await synthWeights();
  const env = { ...process.env, TT_RF_DETR_WEIGHTS: dir };
  const warn = /WARNING: .* holds SYNTHETIC weights \(rfdetr weights synth, seed 0x1\): detections are meaningless/;
  const d = await runInProcess(['detect', '--json', path.join(testFixturesDir, 'rfdetr-synth', 'case-1', 'input.png')], { env });
  assert.equal(d.code, 0, d.stderr);
  assert.match(d.stderr, warn);
  for (const argv of [['info'], ['weights', 'verify', '--no-hashes'], ['weights', 'where']]) {
    const r = await runInProcess(argv, { env });
    assert.equal(r.code, 0, `${argv.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, warn, argv.join(' '));
  }
  const v = await runInProcess(['weights', 'verify', '--no-hashes'], { env });
  assert.match(v.stdout, /OK: the checkpoint matches the schema; it is SYNTHETIC \(rfdetr weights synth\): detections are meaningless/);
  const plain = await runInProcess(['weights', 'where'], { env: { ...process.env, TT_RF_DETR_WEIGHTS: dirWith(tinySafetensors(), configJson(91)) } });
  assert.doesNotMatch(plain.stderr + plain.stdout, /SYNTHETIC/);
});

test('smoke: PASS says "(synthetic weights: detections are meaningless)" when the server\'s /info says synthetic', async () => {
  assert.equal(serverHasSyntheticWeights({ weights: { synthetic: true } }), true);
  assert.equal(serverHasSyntheticWeights({ weights: { synthetic: false } }), false);
  assert.equal(serverHasSyntheticWeights({ weights: null }), false);
  assert.equal(serverHasSyntheticWeights(undefined), false);
  for (const synthetic of [true, false]) {
    const server = await replayServer({ info: { model: 'RF-DETR-base', weights: { repo: 'local', revision: null, synthetic } } });
    try {
      const r = await runInProcess(['smoke', '--url', server.url]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.match(r.stdout, /^PASS n=\d+ /);
      if (synthetic) {
        assert.match(r.stdout, / \(synthetic weights: detections are meaningless\)\n$/);
        assert.match(r.stderr, /serves SYNTHETIC weights/);
      } else {
        assert.doesNotMatch(r.stdout + r.stderr, /synthetic/i);
      }
    } finally {
      await server.close();
    }
  }
});
