// SERVING.md is the operator's manual: it names every flag and environment variable the product reads, the
// gates and pins operators check against, and nothing from another machine. The flag tables are read against
// the programs themselves: `rfdetr serve`'s commander options and the built sidecar's --help.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { packageRoot, sidecarBinary } from '../../src/config/paths.ts';
import type { Command } from 'commander';
import { buildProgram } from '../../cli/program.ts';
import type { CliContext } from '../../cli/context.ts';
import { readText, serverRoutes } from './ship-helpers.ts';

const doc = () => readText('SERVING.md');

test('SERVING.md: every environment variable the serving world sets is documented', () => {
  const d = doc();
  for (const v of ['HF_MODEL', 'TT_WEIGHTS_REVISION', 'TT_MODEL_WEIGHTS_REVISION', 'TT_RF_DETR_WEIGHTS', 'HF_HOME', 'HF_HUB_CACHE',
    'HF_ENDPOINT', 'HF_TOKEN', 'HF_HUB_OFFLINE', 'TT_MESH_SHAPE', 'TT_DEVICE_ID', 'TT_METAL_VISIBLE_DEVICES', 'MESH_DEVICE',
    'RFDETR_SOCKET', 'RFDETR_ENGINE', 'RFDETR_THREADS', 'RFDETR_CMAKE_ARGS', 'TT_METAL_CACHE']) {
    assert.ok(d.includes(`\`${v}\``), `SERVING.md does not document ${v}`);
  }
});

/** A section of SERVING.md: from its `### title` line to the next heading. */
function section(title: string): string {
  const parts = doc().split(`\n### ${title}`);
  assert.equal(parts.length, 2, `SERVING.md has no single "### ${title}" section`);
  return parts[1]!.split(/\n#{2,3} /)[0]!;
}

/** The flags a table's first column names (`--model REPO`, `--revision SHA` is two). */
function tableFlags(text: string): string[] {
  const flags = new Set<string>();
  for (const row of text.split('\n').filter((l) => l.startsWith('| `-'))) {
    for (const m of row.split(' | ')[0]!.matchAll(/`(--[a-z][a-z0-9-]*)/g)) flags.add(m[1]!);
  }
  return [...flags].sort();
}

/** The long flags a commander command defines, from its own option objects (help excepted). */
function commanderFlags(cmd: Command): string[] {
  return cmd.options.map((o) => o.long).filter((f): f is string => !!f && f !== '--help').sort();
}

const program = () => buildProgram({ stdout: { write: () => true }, stderr: { write: () => true }, env: {}, cwd: process.cwd() } as unknown as CliContext);

test('SERVING.md: the rfdetr serve table lists exactly the flags serve defines', () => {
  const serve = program().commands.find((c) => c.name() === 'serve');
  assert.ok(serve, 'the program has a serve command');
  const defined = commanderFlags(serve);
  assert.ok(defined.length >= 10, `read only ${defined.length} flags from commander`);
  assert.deepEqual(tableFlags(section('`rfdetr serve`')), defined, 'SERVING.md "rfdetr serve" table vs serve\'s commander options');
});

test('SERVING.md: the sidecar flag table lists exactly the flags rfdetr-sidecar --help prints', () => {
  const bin = sidecarBinary();
  assert.ok(fs.existsSync(bin), `${bin} is not built; run npm run build:sidecar`);
  const help = spawnSync(bin, ['--help'], { encoding: 'utf8' });
  const flags = new Set([...(help.stdout + help.stderr).matchAll(/^\s+(--[a-z][a-z0-9-]*)/gm)].map((m) => m[1]!));
  flags.delete('--help');
  flags.delete('--version');
  assert.ok(flags.size >= 5, `could not read flags from --help:\n${help.stdout}`);
  assert.deepEqual(tableFlags(section('`rfdetr-sidecar`')), [...flags].sort());
});

test('SERVING.md: the pins, gates and demo operators check against', () => {
  const d = doc();
  for (const s of ['7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a', 'v0.78.0-dev20260820-25', '8b98410e730', '98.5',
    'http://images.cocodataset.org/val2017/000000039769.jpg', 'cat 0.96 / 0.93, remote 0.90 / 0.73,\ncouch 0.67',
    'rfdetr verify --engine tt', 'rfdetr-serve ready: Application startup complete', 'written and reviewed, not built', 'Batch 1', 'shape-locked to the variant\'s input', 'Base 560×560',
    'serialised per engine', 'ENTRYPOINT ["rfdetr", "serve"]']) {
    assert.ok(d.includes(s), `SERVING.md lacks ${JSON.stringify(s)}`);
  }
});

test('SERVING.md: no paths or hosts from another machine', () => {
  const d = doc();
  for (const bad of [/deepgadget/i, /\/home\/\w+/, /experiments\//, /gbp-tt/, /changh95\/rf-detr-p150/]) assert.doesNotMatch(d, bad);
});

test('SERVING.md: the route table lists every route the server serves', () => {
  const routes = serverRoutes();
  const table = section('Routes');
  for (const r of routes) assert.match(table, new RegExp(`\`(GET|POST) ${r.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\``), `SERVING.md's route table lacks ${r}`);
});

/** Every file under `dir` (relative to the package root) whose name passes `keep`. */
function filesUnder(dir: string, keep: (name: string) => boolean): string[] {
  const root = path.join(packageRoot, dir);
  if (!fs.existsSync(root)) return [];
  return (fs.readdirSync(root, { recursive: true, withFileTypes: true }) as fs.Dirent[])
    .filter((e) => e.isFile() && keep(e.name))
    .map((e) => path.join(e.parentPath, e.name));
}

/** The environment variables the product reads: `env.X` / `env['X']` / `f(env, 'X')` in the TypeScript and JavaScript it runs,
 * getenv("X") in the sidecar, and the variables rfdetr-sidecar --help names as its flags' fallbacks. */
function envReads(): Map<string, string> {
  const reads = new Map<string, string>();
  const js = [...filesUnder('src', (n) => n.endsWith('.ts')), ...filesUnder('cli', (n) => n.endsWith('.ts')),
    ...filesUnder('bin', (n) => n.endsWith('.js')), ...filesUnder('scripts', (n) => n.endsWith('.mjs'))];
  for (const f of js) {
    // env.X, env['X'], and a helper handed the environment and a name: secondsFromEnv(env, 'X').
    for (const m of fs.readFileSync(f, 'utf8').matchAll(/\benv(?:\.|\[['"])([A-Z][A-Z0-9_]+)\b|\benv,\s*['"]([A-Z][A-Z0-9_]+)['"]/g)) {
      reads.set((m[1] ?? m[2])!, path.relative(packageRoot, f));
    }
  }
  for (const f of filesUnder(path.join('sidecar', 'src'), (n) => /\.(cpp|h)$/.test(n))) {
    for (const m of fs.readFileSync(f, 'utf8').matchAll(/\bgetenv\("([A-Z][A-Z0-9_]+)"\)/g)) reads.set(m[1]!, path.relative(packageRoot, f));
  }
  const help = spawnSync(sidecarBinary(), ['--help'], { encoding: 'utf8' }).stdout;
  for (const m of help.matchAll(/\(env\s+([A-Z][A-Z0-9_]+)/g)) reads.set(m[1]!, 'rfdetr-sidecar --help');
  return reads;
}

/** The variables a table documents: every backticked NAME in the rows' first cell (or the env column). */
function tableVars(text: string, column: number): Map<string, string> {
  const vars = new Map<string, string>();
  for (const row of text.split('\n').filter((l) => l.startsWith('| `'))) {
    const cells = row.split(' | ');
    for (const m of (cells[column] ?? '').matchAll(/`([A-Z][A-Z0-9_]+)`/g)) vars.set(m[1]!, row);
  }
  return vars;
}

test('SERVING.md: the environment tables document every variable the code reads, and only those or ones another program reads', () => {
  const reads = envReads();
  assert.ok(reads.size >= 20, `found only ${reads.size} environment reads in the source`);
  const documented = new Map([...tableVars(section('Environment (as the serving world sets it)'), 0), ...tableVars(section('`rfdetr-sidecar`'), 1)]);
  const undocumented = [...reads].filter(([v]) => !documented.has(v)).map(([v, where]) => `${v} (read in ${where})`);
  assert.deepEqual(undocumented, [], 'variables the code reads that SERVING.md\'s environment tables lack');
  // A documented variable our code never reads must say which program does (tt-metal, tt-model, the build).
  // Set for a child (the sidecar pool's TT_VISIBLE_DEVICES) or read by a script: any mention in the code counts.
  const code = [...filesUnder('src', (n) => n.endsWith('.ts')), ...filesUnder('cli', (n) => n.endsWith('.ts')),
    ...filesUnder('scripts', () => true), ...filesUnder('deploy', () => true), path.join(packageRoot, 'Dockerfile'),
    path.join(packageRoot, 'package.json'), path.join(packageRoot, 'sidecar', 'CMakeLists.txt')].map((f) => fs.readFileSync(f, 'utf8')).join('\n');
  const stale = [...documented].filter(([v, row]) => !reads.has(v) && !code.includes(v) && !/tt-metal|tt-model|informational/.test(row)).map(([v]) => v);
  assert.deepEqual(stale, [], 'variables SERVING.md documents that nothing reads');
});
