// `weights synth`: seed validation in TS, running the generator (a scripted stand-in here; the real rfdetr-synth
// when it is built), passing its output through, and checking what it wrote against the schema.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { formatSeed, parseSeed, runSynth } from '../../src/weights/synth.ts';
import { isRfdetrError } from '../../src/errors.ts';
import { synthBinary, testFixturesDir } from '../../src/config/paths.ts';
import { SafetensorsFile } from '../../src/weights/safetensors.ts';
import { tmpDir, writeFakeSynth } from './checkpoints.ts';

let root: string;
let fakeEnv: NodeJS.ProcessEnv;

before(() => {
  root = tmpDir('synth');
  fakeEnv = writeFakeSynth(root);
});
after(() => fs.rmSync(root, { recursive: true, force: true }));

test('synth: seeds are decimal or 0x-hex up to 64 bits', () => {
  assert.equal(parseSeed('0'), 0n);
  assert.equal(parseSeed('1'), 1n);
  assert.equal(parseSeed('0x1'), 1n);
  assert.equal(parseSeed('012'), 12n, 'decimal, as rfdetr-synth reads it');
  assert.equal(parseSeed('0XdeadBEEF'), 0xdeadbeefn);
  assert.equal(parseSeed('18446744073709551615'), 0xffffffffffffffffn);
  assert.equal(parseSeed('0xffffffffffffffff'), 0xffffffffffffffffn);
  assert.equal(formatSeed(255n), '0xff');
});

test('synth: a bad seed is a usage error naming the value', () => {
  for (const bad of ['', '-1', '1e3', '0x', '0x1g', ' 1', '1.5', 'abc', '18446744073709551616', '0x10000000000000000', ' 0x1 2']) {
    assert.throws(() => parseSeed(bad), (e: unknown) => {
      assert.ok(isRfdetrError(e, 'E_USAGE'), `${JSON.stringify(bad)}: ${String(e)}`);
      assert.ok(e.message.includes(`for --seed but received ${JSON.stringify(bad)}`), e.message);
      return true;
    });
  }
});

test('synth: runs the generator with --seed (decimal) --out [--num-classes], passes its output through, verifies the result', async () => {
  const out = path.join(root, 'out1');
  let stderr = '';
  let stdout = '';
  const r = await runSynth({ seed: 0xffn, out, numClasses: 91, env: fakeEnv, onStderr: (s) => (stderr += s), onStdout: (s) => (stdout += s) });
  assert.deepEqual(fs.readFileSync(fakeEnv.FAKE_SYNTH_ARGS!, 'utf8').trim().split('\n'), ['--seed', '255', '--out', out, '--num-classes', '91']);
  assert.match(stderr, /WARNING: SYNTHETIC weights, detections are meaningless/);
  assert.match(stdout, /wrote 487 tensors/);
  assert.equal(r.dir, out);
  assert.equal(r.report.ok, true);
  assert.equal(r.report.model.tensors, 487);
  assert.deepEqual(r.files, { model: path.join(out, 'model.safetensors'), config: path.join(out, 'config.json') });
});

test('synth: a failing generator, a missing config.json and a missing binary are errors that say so', async () => {
  await assert.rejects(runSynth({ seed: 1n, out: path.join(root, 'out2'), env: { ...fakeEnv, FAKE_SYNTH_FAIL: '1' } }), (e: unknown) => {
    assert.ok(isRfdetrError(e, 'E_WEIGHTS_INVALID'));
    assert.match(e.message, /fake-rfdetr-synth --seed 1 --out .*out2 exited with code 3: .*cannot write .*disk full/);
    return true;
  });
  await assert.rejects(runSynth({ seed: 1n, out: path.join(root, 'out3'), env: { ...fakeEnv, FAKE_SYNTH_NO_CONFIG: '1' } }), /its output in .*out3 does not verify:\n {2}- .*config\.json: ENOENT/);
  await assert.rejects(runSynth({ seed: 1n, out: path.join(root, 'out4'), env: { RFDETR_SYNTH: path.join(root, 'no-such-binary') } }), (e: unknown) => {
    assert.ok(isRfdetrError(e, 'E_WEIGHTS_NOT_FOUND'));
    assert.match(e.message, /no-such-binary does not exist\. Build it with `npm run build:sidecar`/);
    return true;
  });
});

test('synth: the real rfdetr-synth writes a schema-valid checkpoint matching weights_check_seed0x1.json', async () => {
  const bin = synthBinary({});
  const check = path.join(testFixturesDir, 'weights_check_seed0x1.json');
  assert.ok(fs.existsSync(bin), `${bin} is not built (npm run build:sidecar)`);
  assert.ok(fs.existsSync(check), `${check} is absent (it is in the repository)`);
  const out = path.join(root, 'real');
  let warned = '';
  const r = await runSynth({ seed: parseSeed('0x1'), out, onStderr: (s) => (warned += s), onStdout: (s) => (warned += s) });
  assert.equal(r.report.ok, true, r.report.problems.join('\n'));
  assert.match(warned, /synthetic/i);
  const want = JSON.parse(fs.readFileSync(check, 'utf8')) as { tensors: Record<string, { sha256_le_f32: string }> };
  const f = SafetensorsFile.read(r.files.model);
  for (const name of ['class_embed.bias', 'refpoint_embed.weight', 'backbone.0.encoder.encoder.embeddings.position_embeddings']) {
    assert.equal(crypto.createHash('sha256').update(f.raw(name)).digest('hex'), want.tensors[name]!.sha256_le_f32, name);
  }
  // A fine-tuned-shaped checkpoint: the verifier takes the class count from class_embed.weight rows.
  const r80 = await runSynth({ seed: 7n, out: path.join(root, 'real80'), numClasses: 80 });
  assert.equal(r80.report.ok, true, r80.report.problems.join('\n'));
  assert.equal(r80.report.model.numClasses, 80);
  assert.equal(r80.report.config.labels, 80);
});

test('synth: `weights synth --variant seg-nano` / seg-2xlarge runs the real generator and verifies as that Seg variant', async () => {
  assert.ok(fs.existsSync(synthBinary({})), `${synthBinary({})} is not built (npm run build:sidecar)`);
  for (const variant of ['seg-nano', 'seg-2xlarge']) {
    const r = await runSynth({ seed: 1n, out: path.join(root, variant), variant });
    assert.equal(r.report.ok, true, r.report.problems.join('\n'));
    assert.equal(r.report.model.variant, variant);
    assert.equal(r.report.model.tensors, variant === 'seg-nano' ? 544 : 600);
    const cfg = JSON.parse(fs.readFileSync(r.files.config, 'utf8')) as { architectures?: string[]; image_size?: number };
    assert.deepEqual(cfg.architectures, ['RfDetrForInstanceSegmentation']);
    assert.equal(cfg.image_size, variant === 'seg-nano' ? 312 : 768);
    fs.rmSync(r.dir, { recursive: true, force: true });
  }
});
