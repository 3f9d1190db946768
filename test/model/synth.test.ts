// rfdetr-synth, the built generator: its output read with the TypeScript safetensors reader must equal the
// spec's check file (every tensor's SHA-256 and all_tensors_sha256); the command line refuses bad values.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { cocoConfigPath, synthBinary, testFixturesDir } from '../../src/config/paths.ts';
import { SafetensorsFile, readSafetensorsHeader } from '../../src/weights/safetensors.ts';
import { skipOrFail } from '../helpers/skip.ts';
import { synthDirName, synthWeights, synthWeightsIn, tempDir } from '../helpers/synth-weights.ts';

interface WeightsCheck {
  seed: number;
  count: number;
  all_tensors_sha256: string;
  tensors: Record<string, { shape: number[]; sha256_le_f32: string }>;
}

const check = JSON.parse(fs.readFileSync(path.join(testFixturesDir, 'weights_check_seed0x1.json'), 'utf8')) as WeightsCheck;
const sha256 = (b: Uint8Array) => crypto.createHash('sha256').update(b).digest('hex');
const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

test('rfdetr-synth --seed 1 matches weights_check_seed0x1.json bit for bit', async () => {
  const out = tempDir();
  try {
    const r = await execa(synthBinary(), ['--seed', '1', '--out', out]);
    assert.match(r.stderr, /SYNTHETIC weights .*seed 0x1.*MEANINGLESS/);
    assert.equal(r.stdout, '', 'stdout stays empty');
    assert.deepEqual(fs.readdirSync(out).sort(), ['config.json', 'model.safetensors'], 'no temporary files left');

    const f = SafetensorsFile.read(path.join(out, 'model.safetensors'));
    assert.equal((8 + f.header.headerBytes) % 8, 0, 'header padded to 8');
    assert.deepEqual(f.header.metadata, { format: 'pt', generator: 'rfdetr-synth v1', num_classes: '91', seed: '0x1', synthetic: 'true', variant: 'base' });
    const names = [...f.header.tensors.keys()];
    assert.equal(names.length, check.count);
    assert.deepEqual([...names].sort(byteOrder), Object.keys(check.tensors).sort(byteOrder), 'the 487 keys');
    // Data in byte-wise sorted key order, contiguous from 0.
    let offset = 0;
    for (const name of [...names].sort(byteOrder)) {
      const e = f.entry(name);
      assert.equal(e.begin, offset, `${name} begins where the previous tensor ends`);
      offset = e.end;
    }
    const all = crypto.createHash('sha256');
    const mismatched: string[] = [];
    for (const name of Object.keys(check.tensors).sort(byteOrder)) {
      const want = check.tensors[name]!;
      assert.equal(f.entry(name).dtype, 'F32');
      assert.deepEqual(f.entry(name).shape, want.shape, `${name} shape`);
      const raw = f.raw(name);
      if (sha256(raw) !== want.sha256_le_f32) mismatched.push(name);
      all.update(raw);
    }
    assert.deepEqual(mismatched, [], 'tensors whose SHA-256 differs from the check file');
    assert.equal(all.digest('hex'), check.all_tensors_sha256);

    const cfg = JSON.parse(fs.readFileSync(path.join(out, 'config.json'), 'utf8')) as Record<string, unknown>;
    const coco = JSON.parse(fs.readFileSync(cocoConfigPath, 'utf8')) as Record<string, unknown>;
    assert.equal(cfg.synthetic, true);
    assert.equal(cfg.synthetic_seed, '0x1');
    assert.deepEqual(cfg.id2label, coco.id2label);
    assert.equal(cfg.d_model, coco.d_model);
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
});

// The family fixtures' weights_check files: every variant's tensors, byte for byte (GENERATOR.md's rule table).
const familyDir = process.env.RFDETR_FAMILY_FIXTURES || path.resolve(testFixturesDir, '..', '..', '..', 'shared', 'fixtures', 'rfdetr-family');
for (const variant of ['nano', 'small', 'medium', 'large', 'large_deprecated']) {
  const checkFile = path.join(familyDir, variant, 'weights_check_seed0x1.json');
  test(`rfdetr-synth --variant ${variant} --seed 1 matches its weights_check_seed0x1.json bit for bit`, async (t) => {
    if (!fs.existsSync(checkFile)) return skipOrFail(t, `no ${checkFile} (the shared family fixtures; set RFDETR_FAMILY_FIXTURES)`);
    const vcheck = JSON.parse(fs.readFileSync(checkFile, 'utf8')) as WeightsCheck;
    const out = tempDir();
    try {
      await execa(synthBinary(), ['--seed', '1', '--variant', variant, '--out', out, '--quiet']);
      const f = SafetensorsFile.read(path.join(out, 'model.safetensors'));
      assert.equal(f.header.metadata.variant, variant);
      assert.equal(f.header.tensors.size, vcheck.count);
      const all = crypto.createHash('sha256');
      const mismatched: string[] = [];
      for (const name of Object.keys(vcheck.tensors).sort(byteOrder)) {
        assert.deepEqual(f.entry(name).shape, vcheck.tensors[name]!.shape, `${name} shape`);
        const raw = f.raw(name);
        if (sha256(raw) !== vcheck.tensors[name]!.sha256_le_f32) mismatched.push(name);
        all.update(raw);
      }
      assert.deepEqual(mismatched, [], 'tensors whose SHA-256 differs from the check file');
      assert.equal(all.digest('hex'), vcheck.all_tensors_sha256);
      const cfg = JSON.parse(fs.readFileSync(path.join(out, 'config.json'), 'utf8')) as { image_size?: number; decoder_layers?: number };
      const arch = JSON.parse(fs.readFileSync(path.join(familyDir, variant, 'architecture.json'), 'utf8')) as { resolution: number; dec_layers: number };
      assert.equal(cfg.image_size, arch.resolution);
      assert.equal(cfg.decoder_layers, arch.dec_layers);
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
    }
  });
}

// The RF-DETR Seg fixtures' weights_check files (rfdetr-seg/GENERATOR.md: the family table with norm_in in NORM):
// every tensor of each Seg size, byte for byte.
const segDir = process.env.RFDETR_SEG_FIXTURES || path.resolve(testFixturesDir, '..', '..', '..', 'shared', 'fixtures', 'rfdetr-seg');
for (const size of ['nano', 'small', 'medium', 'large']) {
  const variant = `seg-${size}`;
  const checkFile = path.join(segDir, size, 'weights_check_seed0x1.json');
  test(`rfdetr-synth --variant ${variant} --seed 1 matches the Seg fixture's weights_check_seed0x1.json bit for bit`, async (t) => {
    if (!fs.existsSync(checkFile)) return skipOrFail(t, `no ${checkFile} (the shared Seg fixtures; set RFDETR_SEG_FIXTURES)`);
    const vcheck = JSON.parse(fs.readFileSync(checkFile, 'utf8')) as WeightsCheck;
    const out = tempDir();
    try {
      await execa(synthBinary(), ['--seed', '1', '--variant', variant, '--out', out, '--quiet']);
      const f = SafetensorsFile.read(path.join(out, 'model.safetensors'));
      assert.equal(f.header.metadata.variant, variant);
      assert.equal(f.header.tensors.size, vcheck.count);
      const all = crypto.createHash('sha256');
      const mismatched: string[] = [];
      for (const name of Object.keys(vcheck.tensors).sort(byteOrder)) {
        assert.deepEqual(f.entry(name).shape, vcheck.tensors[name]!.shape, `${name} shape`);
        const raw = f.raw(name);
        if (sha256(raw) !== vcheck.tensors[name]!.sha256_le_f32) mismatched.push(name);
        all.update(raw);
      }
      assert.deepEqual(mismatched, [], 'tensors whose SHA-256 differs from the check file');
      assert.equal(all.digest('hex'), vcheck.all_tensors_sha256);
      // config.json is the fixture's RfDetrForInstanceSegmentation config in the fields a loader checks.
      const cfg = JSON.parse(fs.readFileSync(path.join(out, 'config.json'), 'utf8')) as Record<string, unknown>;
      const fix = JSON.parse(fs.readFileSync(path.join(segDir, size, 'config.json'), 'utf8')) as Record<string, unknown>;
      for (const k of ['architectures', 'image_size', 'decoder_layers', 'num_queries', 'mask_downsample_ratio', 'intermediate_size', 'backbone_config', 'rfdetr']) {
        assert.deepEqual(cfg[k], fix[k], k);
      }
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
    }
  });
}

test('rfdetr-synth refuses bad values with exit 2, naming the flag, and writes nothing', async () => {
  const root = tempDir();
  try {
    const out = path.join(root, 'out');
    const cases: Array<[string[], RegExp]> = [
      [['--seed', 'abc', '--out', out], /--seed: expected a decimal or 0x-hex integer of at most 64 bits, got 'abc'/],
      [['--seed', '-1', '--out', out], /--seed: .* got '-1'/],
      [['--seed', '0x', '--out', out], /--seed: .* got '0x'/],
      [['--seed', '18446744073709551616', '--out', out], /--seed: .*at most 64 bits, got '18446744073709551616'/],
      [['--seed', '0x1ffffffffffffffff', '--out', out], /--seed: .* got '0x1ffffffffffffffff'/],
      [['--out', out], /--seed is required/],
      [['--seed', '1'], /--out is required/],
      [['--seed', '1', '--out', out, '--variant', 'xlarge'], /--variant: expected one of base, nano, small, medium, large, large_deprecated, seg-nano, seg-small, seg-medium, seg-large, seg-xlarge, seg-2xlarge, got 'xlarge'/],
      [['--seed', '1', '--out'], /--out needs a value/],
      [['--seed', '1', '--out', out, '--num-classes', '0'], /--num-classes: expected an integer in 1\.\.100000, got '0'/],
      [['--seed', '1', '--out', out, '--bogus'], /unknown argument '--bogus'/],
    ];
    for (const [args, msg] of cases) {
      const r = await execa(synthBinary(), args, { reject: false });
      assert.equal(r.exitCode, 2, `exit code for ${args.join(' ')}`);
      assert.match(r.stderr, msg);
      assert.match(r.stderr, /usage: rfdetr-synth/);
    }
    assert.equal(fs.existsSync(out), false, 'nothing written');
    // An --out under a regular file cannot be created: exit 1 naming the path.
    fs.writeFileSync(path.join(root, 'file'), 'x');
    const r = await execa(synthBinary(), ['--seed', '1', '--out', path.join(root, 'file', 'sub')], { reject: false });
    assert.equal(r.exitCode, 1);
    assert.match(r.stderr, new RegExp(`${path.join(root, 'file')}`));
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

test('rfdetr-synth: 64-bit seeds in decimal and hex are the same seed; --num-classes shapes the heads', async () => {
  const root = tempDir();
  try {
    const a = path.join(root, 'dec');
    const b = path.join(root, 'hex');
    await execa(synthBinary(), ['--seed', '18446744073709551615', '--out', a, '--num-classes', '7', '--quiet']);
    await execa(synthBinary(), ['--seed=0xFFFFFFFFFFFFFFFF', `--out=${b}`, '--num-classes=7', '--quiet']);
    const fa = fs.readFileSync(path.join(a, 'model.safetensors'));
    assert.equal(sha256(fa), sha256(fs.readFileSync(path.join(b, 'model.safetensors'))));
    const h = readSafetensorsHeader(path.join(a, 'model.safetensors'));
    assert.equal(h.metadata.seed, '0xffffffffffffffff');
    assert.deepEqual(h.tensors.get('class_embed.weight')?.shape, [7, 256]);
    assert.deepEqual(h.tensors.get('transformer.enc_out_class_embed.12.bias')?.shape, [7]);
    assert.deepEqual(h.tensors.get('query_feat.weight')?.shape, [3900, 256]);
    const cfg = JSON.parse(fs.readFileSync(path.join(a, 'config.json'), 'utf8')) as { id2label: Record<string, string>; num_labels: number };
    assert.equal(cfg.num_labels, 7);
    assert.deepEqual(cfg.id2label, Object.fromEntries([0, 1, 2, 3, 4, 5, 6].map((i) => [String(i), `class_${i}`])));
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

test('synthWeights: concurrent callers get one complete directory; later calls reuse it', async () => {
  const root = tempDir();
  try {
    const [d1, d2] = await Promise.all([synthWeightsIn(root, 0x5eedn), synthWeightsIn(root, 0x5eedn)]);
    assert.equal(d1, path.join(root, 'seed-0x5eed'));
    assert.equal(d2, d1);
    assert.deepEqual(fs.readdirSync(root), ['seed-0x5eed'], 'temporary directories removed');
    assert.deepEqual(fs.readdirSync(d1).sort(), ['config.json', 'model.safetensors']);
    assert.equal(readSafetensorsHeader(path.join(d1, 'model.safetensors')).metadata.seed, '0x5eed');
    const mtime = fs.statSync(path.join(d1, 'model.safetensors')).mtimeMs;
    assert.equal(await synthWeightsIn(root, 0x5eedn), d1);
    assert.equal(fs.statSync(path.join(d1, 'model.safetensors')).mtimeMs, mtime, 'not regenerated');
    assert.equal(synthDirName(1n), 'seed-0x1');
    assert.equal(synthDirName(0xabcn, 7), 'seed-0xabc-c7');
    await assert.rejects(synthWeightsIn(root, 1n << 64n), /outside 0\.\.2\^64-1/);
    await assert.rejects(synthWeightsIn(root, -1n), /outside/);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

test('synthWeights(): the shared seed-1 cache under sidecar/build/test-weights', async () => {
  const [a, b] = await Promise.all([synthWeights(), synthWeights(1n)]);
  assert.equal(a, b);
  assert.match(a, /sidecar\/build\/test-weights\/seed-0x1$/);
  const h = readSafetensorsHeader(path.join(a, 'model.safetensors'));
  assert.equal(h.tensors.size, 487);
  assert.equal(h.metadata.synthetic, 'true');
});
