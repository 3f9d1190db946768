// serve's reload (cli/commands/serve-models.ts) in process, on real checkpoint directories and scripted backends:
// nothing changed → nothing restarted; a checkpoint rewritten in place → swapped (the old backend closed); a new
// entry → added; an entry gone → removed (its requests 404); an entry whose directory is bad → failed, the model
// served before keeps serving. The models-file reader's errors name the file, the entry and what was expected.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createReloader, modelIdOf, startModel, type ModelStartOptions } from '../../cli/commands/serve-models.ts';
import type { CliContext } from '../../cli/context.ts';
import { createJsonLogger } from '../../src/http/log.ts';
import { parseWeightsFlag, readModelsFile, type ModelEntry } from '../../src/http/models-file.ts';
import { synthVariantWeights, synthWeights, tempDir } from '../helpers/synth-weights.ts';
import { FakeBackend, goldens, postJson, start } from '../http/helpers.ts';

/** Checkpoints a (base) and n (nano) served from real directories, on backends the test holds. */
async function setup(t: TestContext) {
  const root = tempDir('rfdetr-reload-');
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const A = path.join(root, 'a');
  const N = path.join(root, 'n');
  fs.cpSync(await synthWeights(1n), A, { recursive: true });
  fs.cpSync(await synthVariantWeights('nano'), N, { recursive: true });
  const opened: FakeBackend[] = [];
  const loadNices: Array<number | undefined> = [];
  const ctx = {
    env: {}, cwd: root, stdout: { write: () => true }, stderr: { write: () => true }, readStdin: async () => Buffer.alloc(0),
    openBackend: async (req) => {
      const b = new FakeBackend();
      b.info = { ...b.info!, variant: req.weightsDir.endsWith(`${path.sep}n`) ? 'nano' : 'base' };
      opened.push(b);
      loadNices.push(req.loadNice);
      return b;
    },
  } as CliContext;
  const o: ModelStartOptions = {
    ctx, logger: createJsonLogger('error'), engine: 'cpu', precision: undefined, threads: 1, nice: -10, swapNice: 19, model: undefined, revision: undefined, pool: undefined,
  };
  let entries: ModelEntry[] = [{ id: 'a', weights: A }, { id: 'n', weights: N }];
  const started = await Promise.all(entries.map((e) => startModel(o, e, false)));
  const fingerprints = new Map(started.map((m) => [modelIdOf(m.spec), m.fingerprint]));
  const s = await start({ models: started.map((m) => m.spec) });
  t.after(() => s.stop());
  const swaps: string[] = [];
  const reload = createReloader(o, s.srv.models, () => entries, fingerprints, { inc: (l) => void swaps.push(`${l.model}:${l.outcome}`) });
  const outcomes = async () => (await reload()).models.map((m) => `${m.id}:${m.outcome}`);
  return { A, N, opened, loadNices, s, swaps, reload, outcomes, setEntries: (e: ModelEntry[]) => void (entries = e), entries: () => entries };
}

test('serve reload: unchanged, swapped in place, added, removed, failed', async (t) => {
  const { A, opened, loadNices, s, swaps, reload, outcomes, setEntries, entries } = await setup(t);
  assert.deepEqual(await outcomes(), ['a:unchanged', 'n:unchanged']);
  assert.equal(opened.length, 2, 'nothing restarted');

  // The checkpoint rewritten in place (same path, new mtime): a new backend, the old one closed once drained.
  const t1 = new Date(Date.now() + 5000);
  fs.utimesSync(path.join(A, 'model.safetensors'), t1, t1);
  assert.deepEqual(await outcomes(), ['a:swapped', 'n:unchanged']);
  assert.equal(opened.length, 3);
  assert.equal(opened[0]!.closed, 1, 'the old backend of a is closed');
  assert.equal(s.srv.models.resolve('a').backend, opened[2]);
  assert.deepEqual(loadNices, [undefined, undefined, 19], 'only the sidecar a reload starts loads at --swap-nice');

  setEntries([...entries(), { id: 'b', weights: A }]);
  assert.deepEqual(await outcomes(), ['a:unchanged', 'n:unchanged', 'b:added']);
  assert.deepEqual(s.srv.models.list().map((l) => l.id), ['a', 'n', 'b']);

  setEntries(entries().filter((e) => e.id !== 'n'));
  assert.deepEqual(await outcomes(), ['a:unchanged', 'b:unchanged', 'n:removed']);
  assert.equal(opened[1]!.closed, 1, 'n\'s backend is closed');
  const png = goldens()[0]!.png.toString('base64');
  const gone = await postJson(s.url, { image: png, model: 'n' });
  assert.equal(gone.status, 404);
  assert.match(gone.json.detail, /model "n" is not served here: this server serves a, b;/);

  setEntries([{ id: 'a', weights: path.join(path.dirname(A), 'nowhere') }, { id: 'b', weights: A }]);
  const r = await reload();
  assert.equal(r.models[0]!.outcome, 'failed');
  assert.match(r.models[0]!.error!, /nowhere/);
  assert.equal(s.srv.models.resolve('a').backend, opened[2], 'a keeps its backend');
  assert.equal((await postJson(s.url, { image: png, model: 'a' })).status, 200);
  assert.deepEqual(swaps, ['a:swapped', 'b:added', 'n:removed', 'a:failed']);
});

test('serve reload: two reloads at once (SIGHUP twice, two admin calls) run one after the other: one new sidecar per change, none leaked', async (t) => {
  const { A, opened, s, reload } = await setup(t);
  const t1 = new Date(Date.now() + 5000);
  fs.utimesSync(path.join(A, 'model.safetensors'), t1, t1);
  const [first, second] = await Promise.all([reload(), reload()]);
  assert.deepEqual(first.models.map((m) => `${m.id}:${m.outcome}`), ['a:swapped', 'n:unchanged']);
  assert.deepEqual(second.models.map((m) => `${m.id}:${m.outcome}`), ['a:unchanged', 'n:unchanged'], 'the second re-reads after the first: a is already the new checkpoint');
  assert.equal(opened.length, 3, 'one new backend for the one change');
  assert.deepEqual(opened.map((b) => b.closed), [1, 0, 0], 'the old a closed; the new one serves');
  assert.equal(s.srv.models.resolve('a').backend, opened[2]);
});

test('models file and --weights: ids, relative paths, and errors that name the entry and what was expected', () => {
  const root = tempDir('rfdetr-models-file-');
  try {
    assert.deepEqual(parseWeightsFlag('nano=/srv/n'), { id: 'nano', weights: '/srv/n' });
    assert.deepEqual(parseWeightsFlag('/srv/base'), { weights: '/srv/base' });
    assert.throws(() => parseWeightsFlag('a/b=/srv'), /--weights: model id "a\/b": expected 1-128 letters/);
    const file = path.join(root, 'models.json');
    const write = (v: unknown) => fs.writeFileSync(file, typeof v === 'string' ? v : JSON.stringify(v));
    write({ models: [{ id: 'n', weights: 'nano', precision: 'int8' }, { weights: '/abs/base' }] });
    assert.deepEqual(readModelsFile(file), [{ id: 'n', weights: path.join(root, 'nano'), precision: 'int8' }, { weights: '/abs/base' }]);
    write('{"models": [');
    assert.throws(() => readModelsFile(file), /--models .*models\.json: not JSON/);
    write({ models: [] });
    assert.throws(() => readModelsFile(file), /expected an object with a non-empty "models" array/);
    write({ models: [{ id: 'n', weights: 'x', thread: 2 }] });
    assert.throws(() => readModelsFile(file), /models\[0\]: unknown field "thread": expected only id, weights, engine, precision/);
    write({ models: [{ id: 'n', weights: 3 }] });
    assert.throws(() => readModelsFile(file), /models\[0\]\.weights: expected a non-empty string but received 3/);
    write({ models: [{ id: 'n', weights: 'x' }, { id: 'n', weights: 'y' }] });
    assert.throws(() => readModelsFile(file), /two models have the id "n"/);
    assert.throws(() => readModelsFile(path.join(root, 'absent.json')), /cannot read it \(ENOENT\)/);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});
