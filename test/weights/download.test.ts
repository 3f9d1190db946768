// Downloads against a scripted Hub + CDN on 127.0.0.1 (the real Hub is never contacted: HF_ENDPOINT always points
// at the fake or at a closed port).
import { test, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { resolveWeights } from '../../src/weights/resolve.ts';
import { isRfdetrError } from '../../src/errors.ts';
import { FakeHub, deadEndpoint, etagOf, gitBlobSha1, sha256, type FakeFile } from './fake-hub.ts';
import { configJson, tinySafetensors, tmpDir } from './checkpoints.ts';
import { waitFor } from '../helpers/wait-for.ts';

const REPO = 'Roboflow/rf-detr-base';
const PINNED = '7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a';
const OTHER = '1111111111111111111111111111111111111111';

let hub: FakeHub;
let root: string;
let cache: string;
let model: FakeFile;
let config: FakeFile;
const repoDir = () => path.join(cache, 'models--Roboflow--rf-detr-base');

function env(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return { HOME: root, HF_HUB_CACHE: cache, HF_ENDPOINT: hub.hubUrl, ...extra };
}

beforeEach(async () => {
  root = tmpDir('dl');
  cache = path.join(root, 'hub-cache');
  model = { content: tinySafetensors(1, 50_000), lfs: true };
  config = { content: configJson(91), lfs: false };
  hub = await new FakeHub().start();
  hub.addCommit(REPO, PINNED, { 'model.safetensors': model, 'config.json': config }, 'main');
});

afterEach(async () => {
  await hub.close();
  fs.rmSync(root, { recursive: true, force: true });
});

test('download: a fresh download fills an empty cache in huggingface_hub layout, file by file', async () => {
  const log: string[] = [];
  const r = await resolveWeights({ env: env(), progress: null, log: (l) => log.push(l) });
  assert.equal(r.source, 'download');
  assert.equal(r.commit, PINNED);
  const snap = path.join(repoDir(), 'snapshots', PINNED);
  assert.equal(r.dir, snap);
  assert.deepEqual(r.files, { model: path.join(snap, 'model.safetensors'), config: path.join(snap, 'config.json') });
  // blobs/<etag>: sha256 for the LFS file, git blob sha1 for config.json; nothing else (no .incomplete).
  const modelEtag = sha256(model.content);
  const configEtag = gitBlobSha1(config.content);
  assert.deepEqual(fs.readdirSync(path.join(repoDir(), 'blobs')).sort(), [modelEtag, configEtag].sort());
  assert.deepEqual(fs.readFileSync(path.join(repoDir(), 'blobs', modelEtag)), model.content);
  assert.deepEqual(fs.readFileSync(path.join(repoDir(), 'blobs', configEtag)), config.content);
  // snapshots/<sha>/<file> are relative symlinks into ../../blobs.
  assert.deepEqual(fs.readdirSync(snap).sort(), ['config.json', 'model.safetensors']);
  assert.equal(fs.readlinkSync(r.files.model), `../../blobs/${modelEtag}`);
  assert.equal(fs.readlinkSync(r.files.config), `../../blobs/${configEtag}`);
  assert.deepEqual(fs.readFileSync(r.files.model), model.content);
  // A sha was asked for: no refs/ entry (huggingface_hub writes refs only for branches and tags).
  assert.equal(fs.existsSync(path.join(repoDir(), 'refs')), false);
  assert.deepEqual(fs.readdirSync(repoDir()).sort(), ['blobs', 'snapshots']);
  // The protocol: HEAD at the revision, GET the CDN location, HEAD + GET config at the resolved commit.
  assert.deepEqual(hub.requests.map((q) => `${q.server} ${q.method} ${q.url}`), [
    `hub HEAD /${REPO}/resolve/${PINNED}/model.safetensors`,
    `cdn GET /lfs/${modelEtag}?signed=1`,
    `hub HEAD /${REPO}/resolve/${PINNED}/config.json`,
    `hub GET /${REPO}/resolve/${PINNED}/config.json`,
  ]);
  assert.match(r.chain.at(-1)!, /is commit 7b95b0.*\(winner\)/);
  assert.ok(log.some((l) => /sha256 verified/.test(l)) && log.some((l) => /git-sha1 verified/.test(l)), log.join('\n'));
});

test('download: the second run is a cache hit and makes no request', async () => {
  await resolveWeights({ env: env(), progress: null });
  const n = hub.count();
  assert.equal(n, 4);
  const r = await resolveWeights({ env: env(), progress: null });
  assert.equal(r.source, 'cache');
  assert.equal(hub.count(), n);
  // fetch (refresh) of a sha is also a cache hit: a commit never changes.
  const f = await resolveWeights({ env: env(), progress: null, hubOnly: true, refresh: true });
  assert.equal(f.source, 'cache');
  assert.equal(hub.count(), n);
});

test('download: a branch is resolved to its commit and recorded in refs/<branch>', async () => {
  const r = await resolveWeights({ env: env({ TT_WEIGHTS_REVISION: 'main' }), progress: null });
  assert.equal(r.source, 'download');
  assert.equal(r.revision, 'main');
  assert.equal(r.commit, PINNED);
  assert.equal(fs.readFileSync(path.join(repoDir(), 'refs', 'main'), 'utf8'), PINNED);
  // Next time the cache answers through refs/main, without a request.
  const n = hub.count();
  const again = await resolveWeights({ env: env({ TT_WEIGHTS_REVISION: 'main' }), progress: null });
  assert.equal(again.source, 'cache');
  assert.equal(again.dir, r.dir);
  assert.match(again.chain.join('\n'), /via .*refs\/main/);
  assert.equal(hub.count(), n);
  // When main moves, fetch (refresh) follows it and only the changed file is downloaded.
  const model2: FakeFile = { content: tinySafetensors(2, 1000), lfs: true };
  hub.addCommit(REPO, OTHER, { 'model.safetensors': model2, 'config.json': config }, 'main');
  const moved = await resolveWeights({ env: env({ TT_WEIGHTS_REVISION: 'main' }), progress: null, refresh: true });
  assert.equal(moved.commit, OTHER);
  assert.equal(fs.readFileSync(path.join(repoDir(), 'refs', 'main'), 'utf8'), OTHER);
  assert.deepEqual(fs.readFileSync(moved.files.model), model2.content);
  assert.equal(fs.readlinkSync(moved.files.config), `../../blobs/${gitBlobSha1(config.content)}`);
  const gets = hub.requests.slice(n).filter((q) => q.method === 'GET').map((q) => q.url);
  assert.deepEqual(gets, [`/lfs/${sha256(model2.content)}?signed=1`], 'config.json blob reused, not downloaded again');
});

test('download: an interrupted body is resumed with Range from where it stopped', async () => {
  hub.cutCdnOnceAfter = 60_000;
  const log: string[] = [];
  const r = await resolveWeights({ env: env(), progress: null, log: (l) => log.push(l) });
  assert.deepEqual(fs.readFileSync(r.files.model), model.content);
  const cdnGets = hub.requests.filter((q) => q.server === 'cdn');
  assert.equal(cdnGets.length, 2, 'one cut transfer, one resumed');
  assert.equal(cdnGets[0]!.headers.range, undefined);
  assert.equal(cdnGets[1]!.headers.range, 'bytes=60000-');
  assert.ok(log.some((l) => /interrupted at 60000 bytes/.test(l)), log.join('\n'));
  assert.deepEqual(fs.readdirSync(path.join(repoDir(), 'blobs')).filter((f) => f.endsWith('.incomplete')), []);
});

test('download: a partial blob left by an earlier run is resumed, not restarted', async () => {
  const etag = etagOf(model);
  fs.mkdirSync(path.join(repoDir(), 'blobs'), { recursive: true });
  fs.writeFileSync(path.join(repoDir(), 'blobs', `${etag}.incomplete`), model.content.subarray(0, 12_345));
  const r = await resolveWeights({ env: env(), progress: null });
  assert.deepEqual(fs.readFileSync(r.files.model), model.content);
  const cdn = hub.requests.filter((q) => q.server === 'cdn');
  assert.equal(cdn.length, 1);
  assert.equal(cdn[0]!.headers.range, 'bytes=12345-');
  // A server that ignores Range gets a clean restart, not a doubled file.
  fs.rmSync(path.join(root, 'hub-cache'), { recursive: true });
  fs.mkdirSync(path.join(repoDir(), 'blobs'), { recursive: true });
  fs.writeFileSync(path.join(repoDir(), 'blobs', `${etag}.incomplete`), model.content.subarray(0, 999));
  hub.ignoreRange = true;
  const r2 = await resolveWeights({ env: env(), progress: null });
  assert.deepEqual(fs.readFileSync(r2.files.model), model.content);
});

test('download: a corrupted body is rejected and leaves nothing in blobs/', async () => {
  hub.corrupt = true;
  await assert.rejects(resolveWeights({ env: env(), progress: null }), (e: unknown) => {
    assert.ok(isRfdetrError(e, 'E_HUB'), String(e));
    assert.match(e.message, new RegExp(`model\\.safetensors: content from .* has sha256 [0-9a-f]{64} but the Hub's etag is ${sha256(model.content)}; the download was discarded`));
    return true;
  });
  assert.deepEqual(fs.readdirSync(path.join(repoDir(), 'blobs')), []);
  assert.equal(fs.existsSync(path.join(repoDir(), 'snapshots', PINNED, 'model.safetensors')), false);
});

test('download: a corrupted non-LFS file fails its git blob sha1', async () => {
  // Only config.json is corrupted: the model blob is already cached.
  await resolveWeights({ env: env(), progress: null });
  fs.rmSync(path.join(repoDir(), 'snapshots', PINNED, 'config.json'));
  fs.rmSync(path.join(repoDir(), 'blobs', gitBlobSha1(config.content)));
  hub.corrupt = true;
  await assert.rejects(resolveWeights({ env: env(), progress: null }), /config\.json: content from .* has git-sha1 [0-9a-f]{40} but the Hub's etag is/);
  assert.deepEqual(fs.readdirSync(path.join(repoDir(), 'blobs')), [sha256(model.content)]);
});

test('download: HF_HUB_OFFLINE=1 makes no request and uses the cache (refs/<branch> included)', async () => {
  await resolveWeights({ env: env({ TT_WEIGHTS_REVISION: 'main' }), progress: null });
  const n = hub.count();
  const r = await resolveWeights({ env: env({ TT_WEIGHTS_REVISION: 'main', HF_HUB_OFFLINE: '1' }), progress: null, refresh: true });
  assert.equal(r.source, 'cache');
  assert.equal(r.commit, PINNED);
  assert.match(r.chain.join('\n'), /skipped, HF_HUB_OFFLINE=1/);
  assert.equal(hub.count(), n);
  // Offline with nothing cached: a clear error, still no request.
  await assert.rejects(resolveWeights({ env: env({ HF_HUB_OFFLINE: '1', HF_HUB_CACHE: path.join(root, 'empty') }), progress: null }), (e: unknown) => {
    assert.ok(isRfdetrError(e, 'E_WEIGHTS_NOT_FOUND'));
    assert.match(e.message, /HF_HUB_OFFLINE=1 forbids downloading/);
    assert.match(e.message, /rfdetr weights fetch/);
    return true;
  });
  assert.equal(hub.count(), n);
});

test('download: an unreachable Hub falls back to the cache; with no cache the error says what was tried', async () => {
  await resolveWeights({ env: env({ TT_WEIGHTS_REVISION: 'main' }), progress: null });
  const dead = await deadEndpoint();
  const r = await resolveWeights({ env: env({ TT_WEIGHTS_REVISION: 'main', HF_ENDPOINT: dead }), progress: null, refresh: true });
  assert.equal(r.source, 'cache');
  assert.equal(r.commit, PINNED);
  assert.match(r.chain.join('\n'), /unreachable.*ECONNREFUSED/);
  assert.match(r.chain.at(-1)!, /\(winner\)/);
  await assert.rejects(resolveWeights({ env: env({ HF_ENDPOINT: dead, HF_HUB_CACHE: path.join(root, 'empty') }), progress: null }), (e: unknown) => {
    assert.ok(isRfdetrError(e, 'E_WEIGHTS_NOT_FOUND'));
    assert.match(e.message, new RegExp(`the Hub at ${dead.replace(/[.]/g, '\\.')} could not be reached`));
    assert.match(e.message, /HEAD http:\/\/127\.0\.0\.1:\d+\/Roboflow\/rf-detr-base\/resolve\/7b95b0\w+\/model\.safetensors failed/);
    assert.match(e.message, /--weights DIR/);
    assert.match(e.message, /rfdetr weights synth --seed 1 --out DIR/);
    return true;
  });
});

test('download: an unknown revision is a clear error naming repo and revision', async () => {
  await assert.rejects(resolveWeights({ env: env(), revision: 'v9-nope', progress: null }), (e: unknown) => {
    assert.ok(isRfdetrError(e, 'E_HUB'));
    assert.match(e.message, /revision 'v9-nope' not found in repo 'Roboflow\/rf-detr-base'/);
    assert.match(e.message, /HTTP 404 RevisionNotFound \(Invalid rev id: v9-nope\)/);
    assert.match(e.message, /check --revision/);
    return true;
  });
  await assert.rejects(resolveWeights({ env: env(), revision: 'f'.repeat(40), progress: null }), /revision 'f{40}' not found/);
  await assert.rejects(resolveWeights({ env: env(), model: 'nobody/nothing', progress: null }), /repo 'nobody\/nothing' not found or not accessible: .*HTTP 401 RepoNotFound.*set HF_TOKEN/);
  assert.equal(fs.existsSync(path.join(repoDir(), 'blobs')), false);
});

test('download: HF_TOKEN goes to the endpoint only, never to the CDN host', async () => {
  await resolveWeights({ env: env({ HF_TOKEN: 'hf_secret' }), progress: null });
  const hubReqs = hub.requests.filter((q) => q.server === 'hub');
  const cdnReqs = hub.requests.filter((q) => q.server === 'cdn');
  assert.equal(hubReqs.length, 3);
  assert.equal(cdnReqs.length, 1);
  for (const q of hubReqs) assert.equal(q.headers.authorization, 'Bearer hf_secret', `${q.method} ${q.url}`);
  for (const q of cdnReqs) assert.equal(q.headers.authorization, undefined, `${q.method} ${q.url}`);
});

test('download: without HF_TOKEN no Authorization header is sent', async () => {
  await resolveWeights({ env: env(), progress: null });
  assert.ok(hub.requests.every((q) => q.headers.authorization === undefined));
});

test('download: a progress bar is drawn on a TTY only', async () => {
  let drawn = '';
  await resolveWeights({ env: env(), progress: { isTTY: true, write: (s: string) => (drawn += s) } });
  assert.match(drawn, /\r\x1b\[2Kmodel\.safetensors \[#+\] 100% 0\.2\/0\.2 MB/);
  fs.rmSync(cache, { recursive: true });
  let notTty = '';
  await resolveWeights({ env: env(), progress: { isTTY: false, write: (s: string) => (notTty += s) } });
  assert.equal(notTty, '');
});

test('download: a renamed repo (relative redirect) is followed on the same host, token kept', async () => {
  hub.renames.set('Roboflow/old-name', REPO);
  const r = await resolveWeights({ env: env({ HF_TOKEN: 'hf_secret' }), model: 'Roboflow/old-name', revision: PINNED, progress: null });
  assert.equal(r.source, 'download');
  // Stored under the name asked for, as huggingface_hub does.
  assert.equal(r.dir, path.join(cache, 'models--Roboflow--old-name', 'snapshots', PINNED));
  assert.deepEqual(fs.readFileSync(r.files.model), model.content);
  const heads = hub.requests.filter((q) => q.method === 'HEAD').map((q) => q.url);
  assert.deepEqual(heads.slice(0, 2), [`/Roboflow/old-name/resolve/${PINNED}/model.safetensors`, `/${REPO}/resolve/${PINNED}/model.safetensors`]);
  assert.ok(hub.requests.filter((q) => q.server === 'hub').every((q) => q.headers.authorization === 'Bearer hf_secret'));
});

test('download: a Hub answering 5xx counts as unavailable: fall back to the cache, else a clear error', async () => {
  await resolveWeights({ env: env({ TT_WEIGHTS_REVISION: 'main' }), progress: null });
  hub.hubStatus = 503;
  const r = await resolveWeights({ env: env({ TT_WEIGHTS_REVISION: 'main' }), progress: null, refresh: true });
  assert.equal(r.source, 'cache');
  assert.match(r.chain.join('\n'), /the Hub is unavailable: HEAD .* → HTTP 503/);
  await assert.rejects(resolveWeights({ env: env({ HF_HUB_CACHE: path.join(root, 'empty') }), progress: null }), /could not be reached/);
});

test('download: a pinned sha answered with another commit is refused', async () => {
  hub.commitOverride = OTHER;
  await assert.rejects(resolveWeights({ env: env(), progress: null }), (e: unknown) => {
    assert.ok(isRfdetrError(e, 'E_HUB'));
    assert.match(e.message, new RegExp(`at commit ${PINNED} but it answered with commit ${OTHER}`));
    return true;
  });
  assert.equal(hub.count('cdn'), 0);
});

test('download: two concurrent resolutions download each blob once', async () => {
  // The first download is held at the CDN until the second resolution has found its lock taken.
  const release = hub.holdCdn();
  const log: string[] = [];
  const both = Promise.all([resolveWeights({ env: env(), progress: null, log: (l) => log.push(l) }), resolveWeights({ env: env(), progress: null, log: (l) => log.push(l) })]);
  await waitFor('the second resolution to wait for the lock (or to reach the CDN too)', () => log.some((l) => /waiting for pid \d+, which is downloading the same file/.test(l)) || hub.count('cdn') > 1, 10_000);
  release();
  const [a, b] = await both;
  assert.equal(a.dir, b.dir);
  assert.deepEqual(fs.readFileSync(a.files.model), model.content);
  assert.equal(hub.requests.filter((q) => q.method === 'GET' && q.url.includes('/lfs/')).length, 1);
  assert.deepEqual(fs.readdirSync(path.join(cache, '.locks', 'models--Roboflow--rf-detr-base')), [], 'locks released');
});

test('download: a lock left by a dead process is taken over', async () => {
  const { spawnSync } = await import('node:child_process');
  const deadPid = spawnSync('true').pid!;
  const locks = path.join(cache, '.locks', 'models--Roboflow--rf-detr-base');
  fs.mkdirSync(locks, { recursive: true });
  fs.writeFileSync(path.join(locks, `${sha256(model.content)}.rfdetr.lock`), String(deadPid));
  const log: string[] = [];
  const r = await resolveWeights({ env: env(), progress: null, log: (l) => log.push(l) });
  assert.deepEqual(fs.readFileSync(r.files.model), model.content);
  assert.ok(log.some((l) => l.includes(`owner ${deadPid} is gone`)), log.join('\n'));
});

test('download: a hanging Hub times out (HF_HUB_ETAG_TIMEOUT) and the cache is used', async () => {
  await resolveWeights({ env: env({ TT_WEIGHTS_REVISION: 'main' }), progress: null });
  // The Hub never answers while held; the error names the limit that ended the wait (0.3 s, not the default 10).
  const release = hub.holdHub();
  try {
    const r = await resolveWeights({ env: env({ TT_WEIGHTS_REVISION: 'main', HF_HUB_ETAG_TIMEOUT: '0.3' }), progress: null, refresh: true });
    assert.equal(r.source, 'cache');
    assert.match(r.chain.join('\n'), /unreachable: HEAD .* failed \(UND_ERR_HEADERS_TIMEOUT.*no answer within 0\.3 s \(HF_HUB_ETAG_TIMEOUT\)/);
  } finally {
    release();
  }
  await assert.rejects(resolveWeights({ env: env({ HF_HUB_ETAG_TIMEOUT: 'soon', HF_HUB_CACHE: path.join(root, 'empty') }), progress: null }), /positive number of seconds for HF_HUB_ETAG_TIMEOUT but received "soon"/);
});

test('download: an etag that is not a safe file name is refused before anything is written', async () => {
  for (const bad of ['..', '../../evil', '.hidden']) {
    hub.linkedEtagOverride = bad;
    await assert.rejects(resolveWeights({ env: env(), progress: null }), (e: unknown) => {
      assert.ok(isRfdetrError(e, 'E_HUB'), String(e));
      assert.match(e.message, /without a usable ETag\/X-Linked-Etag/);
      return true;
    });
  }
  assert.equal(hub.count('cdn'), 0);
  assert.equal(fs.existsSync(path.join(repoDir(), 'blobs')), false);
});
