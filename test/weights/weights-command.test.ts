// `rfdetr weights …` driven through weightsCommand().parseAsync([...], { from: 'user' }) with captured output.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { CommanderError } from 'commander';
import { exitCodeFor, weightsCommand } from '../../cli/commands/weights.ts';
import { isRfdetrError } from '../../src/errors.ts';
import { FakeHub, deadEndpoint, gitBlobSha1 } from './fake-hub.ts';
import { configJson, tmpDir, writeFakeSynth, writeValidCheckpoint } from './checkpoints.ts';

const REPO = 'Roboflow/rf-detr-base';
const PINNED = '7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a';
let root: string;
let dead: string;

async function run(args: string[], env: NodeJS.ProcessEnv): Promise<{ out: string; err: string; error: unknown; code: number }> {
  let out = '';
  let err = '';
  let error: unknown = null;
  try {
    await weightsCommand({ out: (s) => (out += s), err: (s) => (err += s), env, progress: null }).parseAsync(args, { from: 'user' });
  } catch (e) {
    error = e;
  }
  return { out, err, error, code: error === null ? 0 : exitCodeFor(error) };
}

before(async () => {
  root = tmpDir('cli');
  dead = await deadEndpoint();
});
after(() => fs.rmSync(root, { recursive: true, force: true }));

test('weights where: prints the chain and the winner; --json gives the same as one object', async () => {
  const dir = path.join(root, 'w1');
  writeValidCheckpoint(dir);
  const env = { HOME: root, HF_ENDPOINT: dead, TT_RF_DETR_WEIGHTS: dir };
  const r = await run(['where'], env);
  assert.equal(r.code, 0, String(r.error));
  assert.equal(r.out, [
    'resolution chain:',
    `  1. TT_RF_DETR_WEIGHTS ${dir}: found model.safetensors and config.json (winner)`,
    `winner: env  ${dir}`,
    '  repo      (a local directory)',
    '  revision  -',
    '  commit    (unknown)',
    `  model     ${dir}/model.safetensors`,
    `  config    ${dir}/config.json`,
    '',
  ].join('\n'));
  const j = await run(['where', '--json'], env);
  const parsed = JSON.parse(j.out) as { source: string; dir: string; chain: string[] };
  assert.equal(parsed.source, 'env');
  assert.equal(parsed.dir, dir);
  assert.equal(parsed.chain.length, 1);
});

test('weights where: nothing found is exit 1 with what was tried; it never downloads', async () => {
  const hub = await new FakeHub().start();
  try {
    const r = await run(['where', '--model', 'org/thing', '--revision', 'dev'], { HOME: root, HF_HUB_CACHE: path.join(root, 'empty'), HF_ENDPOINT: hub.hubUrl });
    assert.equal(r.code, 1);
    assert.ok(isRfdetrError(r.error, 'E_WEIGHTS_NOT_FOUND'));
    assert.match((r.error as Error).message, /No weights found for org\/thing@dev/);
    assert.match((r.error as Error).message, /rfdetr weights fetch --model org\/thing --revision dev/);
    assert.equal(hub.count(), 0);
  } finally {
    await hub.close();
  }
});

test('weights fetch: downloads into the cache and prints the snapshot dir; the second fetch is a cache hit', async () => {
  const hub = await new FakeHub().start();
  try {
    const model = fs.readFileSync(writeValidCheckpoint(path.join(root, 'src')).model);
    hub.addCommit(REPO, PINNED, { 'model.safetensors': { content: model, lfs: true }, 'config.json': { content: configJson(), lfs: false } });
    const cache = path.join(root, 'fetch-cache');
    const env = { HOME: root, HF_HUB_CACHE: cache, HF_ENDPOINT: hub.hubUrl, TT_RF_DETR_WEIGHTS: path.join(root, 'ignored-by-fetch') };
    const snap = path.join(cache, 'models--Roboflow--rf-detr-base', 'snapshots', PINNED);
    const r = await run(['fetch'], env);
    assert.equal(r.code, 0, String(r.error));
    assert.equal(r.out, `${snap}\n`);
    assert.match(r.err, /weights: downloaded; check them with: rfdetr weights verify/);
    assert.equal(fs.readlinkSync(path.join(snap, 'config.json')), `../../blobs/${gitBlobSha1(configJson())}`);
    const n = hub.count();
    const again = await run(['fetch', '--json'], env);
    assert.equal(JSON.parse(again.out).source, 'cache');
    assert.equal(hub.count(), n);
    // verify on the fetched files: hashes against the etags, schema, config.
    const v = await run(['verify', '--model', REPO], { ...env, TT_RF_DETR_WEIGHTS: undefined });
    assert.equal(v.code, 0, String(v.error));
    assert.match(v.out, /model {3}.*: \d+ bytes, 487 tensors, 91 classes/);
    assert.match(v.out, /model {3}sha256 matches the cache etag [0-9a-f]{64}/);
    assert.match(v.out, /config {2}git-sha1 matches the cache etag [0-9a-f]{40}/);
    assert.match(v.out, /OK: the checkpoint matches the schema/);
  } finally {
    await hub.close();
  }
});

test('weights verify: a broken checkpoint prints its problems and fails with exit 1', async () => {
  const dir = path.join(root, 'broken');
  writeValidCheckpoint(dir, 91);
  fs.writeFileSync(path.join(dir, 'config.json'), configJson(80));
  const r = await run(['verify', '--weights', dir, '--no-hashes'], { HOME: root, HF_ENDPOINT: dead });
  assert.equal(r.code, 1);
  assert.ok(isRfdetrError(r.error, 'E_WEIGHTS_INVALID'));
  assert.match(r.out, /FAILED:\n {2}- .*config\.json: config\.json id2label has 80 labels but the checkpoint has 91 classes/);
  assert.doesNotMatch(r.out, /sha256/);
});

test('weights synth: validates the seed before running anything (usage error, exit 2)', async () => {
  const env = writeFakeSynth(path.join(root, 'fs1'));
  const r = await run(['synth', '--seed', '0xnope', '--out', path.join(root, 'never')], env);
  assert.equal(r.code, 2);
  assert.ok(isRfdetrError(r.error, 'E_USAGE'));
  assert.match((r.error as Error).message, /for --seed but received "0xnope"/);
  assert.equal(fs.existsSync(env.FAKE_SYNTH_ARGS!), false, 'the generator was not started');
  assert.equal(fs.existsSync(path.join(root, 'never')), false);
});

test('weights synth: runs the generator, passes its warning through and adds its own', async () => {
  const env = writeFakeSynth(path.join(root, 'fs2'));
  const out = path.join(root, 'synth-out');
  const r = await run(['synth', '--seed', '42', '--out', out], env);
  assert.equal(r.code, 0, String(r.error));
  assert.equal(r.out, `${out}\n`);
  assert.match(r.err, /rfdetr-synth: WARNING: SYNTHETIC weights, detections are meaningless/);
  assert.match(r.err, /WARNING: .*synth-out holds a SYNTHETIC base checkpoint \(seed 0x2a\): its detections are meaningless/);
  assert.deepEqual(fs.readFileSync(env.FAKE_SYNTH_ARGS!, 'utf8').trim().split('\n'), ['--seed', '42', '--out', out]);
});

test('weights: commander usage errors are CommanderErrors mapped to exit 2; help is exit 0', async () => {
  const r = await run(['where', '--bogus'], { HOME: root, HF_ENDPOINT: dead });
  assert.ok(r.error instanceof CommanderError);
  assert.equal(r.code, 2);
  assert.match(r.err, /unknown option '--bogus'/);
  const m = await run(['synth', '--out', root], { HOME: root });
  assert.equal(m.code, 2);
  assert.match(m.err, /required option '--seed <n>' not specified/);
  const h = await run(['fetch', '--help'], { HOME: root });
  assert.equal(h.code, 0);
  assert.match(h.out, /--model <repo>/);
  assert.match(h.out, /--revision <sha>/);
  for (const sub of ['verify', 'where', 'synth']) {
    const help = await run([sub, '--help'], { HOME: root });
    assert.match(help.out, /--model <repo>[\s\S]*--revision <sha>/, sub);
  }
});
