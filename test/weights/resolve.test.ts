// The resolution chain without the network: explicit directories, HF_MODEL, the cache, precedence and errors.
// HF_ENDPOINT points at a closed port so a slip into step 4 could never reach the real Hub.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { resolveWeights, weightsRequest } from '../../src/weights/resolve.ts';
import { hubCacheDir, parseSnapshotDir, validateRevision } from '../../src/weights/hub-cache.ts';
import { isRfdetrError } from '../../src/errors.ts';
import { deadEndpoint } from './fake-hub.ts';
import { configJson, tinySafetensors, tmpDir } from './checkpoints.ts';

const PINNED = '7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a';
let root: string;
let dead: string;

function env(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return { HOME: root, HF_HUB_CACHE: path.join(root, 'cache'), HF_ENDPOINT: dead, ...extra };
}

function weightsDir(name: string, files: { model?: boolean; config?: boolean } = {}): string {
  const d = path.join(root, name);
  fs.mkdirSync(d, { recursive: true });
  if (files.model !== false) fs.writeFileSync(path.join(d, 'model.safetensors'), tinySafetensors());
  if (files.config !== false) fs.writeFileSync(path.join(d, 'config.json'), configJson());
  return d;
}

/** A cache snapshot as huggingface_hub leaves it (blobs + relative links, optional refs/<branch>). */
function cacheSnapshot(cacheRoot: string, repo: string, commit: string, branch?: string): string {
  const repoDir = path.join(cacheRoot, `models--${repo.replace('/', '--')}`);
  const snap = path.join(repoDir, 'snapshots', commit);
  fs.mkdirSync(snap, { recursive: true });
  fs.mkdirSync(path.join(repoDir, 'blobs'), { recursive: true });
  for (const [name, body] of [['model.safetensors', tinySafetensors()], ['config.json', configJson()]] as const) {
    const etag = `${name === 'config.json' ? 'c' : 'm'}${commit.slice(0, 10)}`;
    fs.writeFileSync(path.join(repoDir, 'blobs', etag), body);
    fs.symlinkSync(`../../blobs/${etag}`, path.join(snap, name));
  }
  if (branch) {
    fs.mkdirSync(path.join(repoDir, 'refs'), { recursive: true });
    fs.writeFileSync(path.join(repoDir, 'refs', branch), commit);
  }
  return snap;
}

before(async () => {
  root = tmpDir('resolve');
  dead = await deadEndpoint();
});
after(() => fs.rmSync(root, { recursive: true, force: true }));

test('resolve: TT_RF_DETR_WEIGHTS wins and is reported as env; every step is logged', async () => {
  const d = weightsDir('env-ok');
  cacheSnapshot(path.join(root, 'cache'), 'Roboflow/rf-detr-base', PINNED);
  const log: string[] = [];
  const r = await resolveWeights({ env: env({ TT_RF_DETR_WEIGHTS: d, HF_MODEL: weightsDir('hfm-ignored') }), log: (l) => log.push(l) });
  assert.equal(r.source, 'env');
  assert.equal(r.dir, d);
  assert.deepEqual(r.files, { model: path.join(d, 'model.safetensors'), config: path.join(d, 'config.json') });
  assert.deepEqual(r.chain, [`TT_RF_DETR_WEIGHTS ${d}: found model.safetensors and config.json (winner)`]);
  assert.deepEqual(log, r.chain.map((c) => `weights: ${c}`));
});

test('resolve: --weights beats TT_RF_DETR_WEIGHTS and is reported as flag', async () => {
  const flag = weightsDir('flag-ok');
  const r = await resolveWeights({ env: env({ TT_RF_DETR_WEIGHTS: path.join(root, 'nope') }), weightsDir: flag });
  assert.equal(r.source, 'flag');
  assert.equal(r.dir, flag);
  assert.match(r.chain[0]!, /TT_RF_DETR_WEIGHTS=.*nope: ignored, --weights given/);
});

test('resolve: TT_RF_DETR_WEIGHTS with a missing file is an error naming the file (no silent fallback)', async () => {
  const d = weightsDir('env-missing', { model: false });
  cacheSnapshot(path.join(root, 'cache-full'), 'Roboflow/rf-detr-base', PINNED);
  await assert.rejects(resolveWeights({ env: env({ TT_RF_DETR_WEIGHTS: d, HF_HUB_CACHE: path.join(root, 'cache-full') }) }), (e: unknown) => {
    assert.ok(isRfdetrError(e, 'E_WEIGHTS_NOT_FOUND'));
    assert.match(e.message, new RegExp(`TT_RF_DETR_WEIGHTS directory ${d} has no model\\.safetensors \\(expected model\\.safetensors and config\\.json\\)`));
    assert.deepEqual(e.details?.missing, ['model.safetensors']);
    return true;
  });
  await assert.rejects(resolveWeights({ env: env(), weightsDir: path.join(root, 'does-not-exist') }), /--weights names .*does-not-exist, which is not a directory/);
});

test('resolve: HF_MODEL as a snapshot directory wins, and its repo and commit are read from the path', async () => {
  const snap = cacheSnapshot(path.join(root, 'hf'), 'Roboflow/rf-detr-base', PINNED);
  const r = await resolveWeights({ env: env({ HF_MODEL: snap }) });
  assert.equal(r.source, 'hf_model_dir');
  assert.equal(r.dir, snap);
  assert.equal(r.repo, 'Roboflow/rf-detr-base');
  assert.equal(r.commit, PINNED);
  assert.deepEqual(r.chain.slice(0, 1), ['TT_RF_DETR_WEIGHTS: not set (no --weights)']);
  assert.match(r.chain[1]!, /HF_MODEL directory .* \(winner\)/);
  // A plain directory works too (repo unknown).
  const plain = weightsDir('plain');
  const p = await resolveWeights({ env: env({ HF_MODEL: plain }) });
  assert.equal(p.source, 'hf_model_dir');
  assert.equal(p.repo, null);
  // A directory missing config.json is an error naming it.
  const half = weightsDir('half', { config: false });
  await assert.rejects(resolveWeights({ env: env({ HF_MODEL: half }) }), /HF_MODEL names the directory .*half, which has no config\.json/);
  // A path that is not a directory is not mistaken for a repo id.
  await assert.rejects(resolveWeights({ env: env({ HF_MODEL: '/no/such/snapshot' }) }), /HF_MODEL=\/no\/such\/snapshot is not a directory and not a Hub repo id/);
});

test('resolve: the Hub cache is found at the pinned sha, or through refs/<branch>', async () => {
  const cacheRoot = path.join(root, 'cache-pinned');
  const snap = cacheSnapshot(cacheRoot, 'Roboflow/rf-detr-base', PINNED, 'main');
  const r = await resolveWeights({ env: env({ HF_HUB_CACHE: cacheRoot }) });
  assert.equal(r.source, 'cache');
  assert.equal(r.dir, snap);
  assert.equal(r.revision, PINNED);
  assert.equal(r.commit, PINNED);
  assert.equal(fs.readFileSync(r.files.model).length, tinySafetensors().length, 'the snapshot link resolves to the blob');
  const b = await resolveWeights({ env: env({ HF_HUB_CACHE: cacheRoot, TT_MODEL_WEIGHTS_REVISION: 'main' }) });
  assert.equal(b.dir, snap);
  assert.equal(b.revision, 'main');
  assert.match(b.chain.at(-1)!, /via .*refs\/main .*\(winner\)/);
  // A dangling snapshot link is a miss, not a hit.
  const broken = path.join(root, 'cache-broken');
  const s2 = cacheSnapshot(broken, 'Roboflow/rf-detr-base', PINNED);
  fs.rmSync(path.join(broken, 'models--Roboflow--rf-detr-base', 'blobs'), { recursive: true });
  await assert.rejects(resolveWeights({ env: env({ HF_HUB_CACHE: broken }), download: false }), (e: unknown) => {
    assert.ok(isRfdetrError(e, 'E_WEIGHTS_NOT_FOUND'));
    assert.match(e.message, new RegExp(`${s2}.*missing model\\.safetensors, config\\.json`));
    return true;
  });
});

test('resolve: the cache location follows HF_HUB_CACHE, then HF_HOME/hub, then ~/.cache/huggingface/hub', () => {
  assert.deepEqual(hubCacheDir({ HF_HUB_CACHE: '/a', HF_HOME: '/b' }), { dir: '/a', from: 'HF_HUB_CACHE' });
  assert.deepEqual(hubCacheDir({ HF_HOME: '/b' }), { dir: '/b/hub', from: 'HF_HOME' });
  assert.deepEqual(hubCacheDir({ HOME: '/home/u' }), { dir: '/home/u/.cache/huggingface/hub', from: 'default' });
  assert.deepEqual(hubCacheDir({ HOME: '/home/u', XDG_CACHE_HOME: '/x' }), { dir: '/x/huggingface/hub', from: 'XDG_CACHE_HOME' });
  assert.equal(hubCacheDir({}).dir, path.join(os.homedir(), '.cache', 'huggingface', 'hub'));
});

test('resolve: repo and revision precedence (flags beat env beat the pin)', () => {
  const e = { HF_MODEL: 'org/other', TT_WEIGHTS_REVISION: 'a'.repeat(40), TT_MODEL_WEIGHTS_REVISION: 'b'.repeat(40) };
  assert.deepEqual(weightsRequest({ env: {} }), { repo: 'Roboflow/rf-detr-base', repoFrom: 'default', revision: PINNED, revisionFrom: 'pinned' });
  assert.equal(weightsRequest({ env: e }).revision, 'a'.repeat(40));
  assert.equal(weightsRequest({ env: { TT_MODEL_WEIGHTS_REVISION: 'b'.repeat(40) } }).revisionFrom, 'TT_MODEL_WEIGHTS_REVISION');
  assert.deepEqual(weightsRequest({ env: e, model: 'x/y', revision: 'dev' }), { repo: 'x/y', repoFrom: '--model', revision: 'dev', revisionFrom: '--revision' });
  assert.equal(weightsRequest({ env: { HF_MODEL: 'org/other' } }).repo, 'org/other');
  // No pin for another repo: its default branch.
  assert.equal(weightsRequest({ env: { HF_MODEL: 'org/other' } }).revision, 'main');
});

test('resolve: malformed --model / --revision are usage errors naming the value', () => {
  assert.throws(() => weightsRequest({ env: {}, model: 'a/b/c' }), (e: unknown) => isRfdetrError(e, 'E_USAGE') && /for --model but received "a\/b\/c"/.test(e.message));
  assert.throws(() => weightsRequest({ env: {}, revision: '../../etc' }), (e: unknown) => isRfdetrError(e, 'E_USAGE') && /for --revision but received "..\/..\/etc"/.test(e.message));
  assert.throws(() => weightsRequest({ env: { TT_WEIGHTS_REVISION: 'a b' } }), /for TT_WEIGHTS_REVISION but received "a b"/);
  assert.equal(validateRevision('refs/pr/1', 'x'), 'refs/pr/1');
});

test('resolve: nothing found without downloading lists every step and the commands that fix it', async () => {
  await assert.rejects(resolveWeights({ env: env({ HF_HUB_CACHE: path.join(root, 'empty') }), download: false }), (e: unknown) => {
    assert.ok(isRfdetrError(e, 'E_WEIGHTS_NOT_FOUND'));
    const m = e.message;
    assert.match(m, /No weights found for Roboflow\/rf-detr-base@7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a/);
    assert.match(m, /Tried:\n {2}- TT_RF_DETR_WEIGHTS: not set \(no --weights\)\n {2}- HF_MODEL: not set\n {2}- Hub cache .*empty.*\(HF_HUB_CACHE\): missing model\.safetensors, config\.json\n {2}- download from .*: not attempted/);
    assert.match(m, /rfdetr weights fetch\n/);
    assert.match(m, /--weights DIR \(or TT_RF_DETR_WEIGHTS=DIR\)/);
    assert.match(m, /rfdetr weights synth --seed 1 --out DIR/);
    assert.equal((e.details?.chain as string[]).length, 4);
    return true;
  });
});

test('resolve: parseSnapshotDir reads models--ORG--NAME/snapshots/<sha> only', () => {
  assert.deepEqual(parseSnapshotDir(`/hf/hub/models--Roboflow--rf-detr-base/snapshots/${PINNED}`), { repo: 'Roboflow/rf-detr-base', commit: PINNED });
  assert.equal(parseSnapshotDir('/hf/hub/models--Roboflow--rf-detr-base/snapshots/main'), null);
  assert.equal(parseSnapshotDir(`/weights/${PINNED}`), null);
});
