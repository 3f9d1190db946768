// The Dockerfile is not built here (no Docker engine): this lints its structure, and checks that every RUN
// is a script from scripts/ (which container-build.test.ts runs outside Docker), so the image adds no
// untested steps.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../src/config/paths.ts';
import { DEFAULT_PORT, ROUTES, readText } from './ship-helpers.ts';

interface Instruction { op: string; args: string; line: number }
interface Stage { name: string; base: string; instructions: Instruction[] }

/** Dockerfile instructions with continuations joined and comments dropped (enough for this file's syntax). */
export function parseDockerfile(text: string): { preamble: Instruction[]; stages: Stage[] } {
  const out: Instruction[] = [];
  let buf = '';
  let start = 0;
  text.split('\n').forEach((raw, i) => {
    const line = raw.trimEnd();
    if (!buf && (/^\s*#/.test(line) || !line.trim())) return;
    if (/^\s*#/.test(line)) return; // comment inside a continuation
    if (!buf) start = i + 1;
    if (line.endsWith('\\')) { buf += line.slice(0, -1) + ' '; return; }
    buf += line;
    const m = /^\s*(\w+)\s+([\s\S]*)$/.exec(buf);
    assert.ok(m, `Dockerfile line ${start}: cannot parse '${buf}'`);
    out.push({ op: m[1]!.toUpperCase(), args: m[2]!.replace(/\s+/g, ' ').trim(), line: start });
    buf = '';
  });
  const preamble: Instruction[] = [];
  const stages: Stage[] = [];
  for (const ins of out) {
    if (ins.op === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args);
      assert.ok(m, `FROM at line ${ins.line}: '${ins.args}'`);
      stages.push({ base: m[1]!, name: m[2] ?? `#${stages.length}`, instructions: [] });
    } else if (stages.length) stages.at(-1)!.instructions.push(ins);
    else preamble.push(ins);
  }
  return { preamble, stages };
}

const df = () => parseDockerfile(readText('Dockerfile'));
const finalStage = () => df().stages.at(-1)!;
const ops = (s: Stage, op: string) => s.instructions.filter((i) => i.op === op);

test('Dockerfile: parser sees continuations and stages (self-check on a small sample)', () => {
  const p = parseDockerfile('ARG A=1\nFROM a AS one\n# c\nRUN bash x.sh \\\n  --y\nFROM one AS two\nUSER u\n');
  assert.deepEqual(p.stages.map((s) => s.name), ['one', 'two']);
  assert.equal(p.stages[0]!.instructions[0]!.args, 'bash x.sh --y');
  assert.equal(p.preamble[0]!.op, 'ARG');
});

test('Dockerfile: multi-stage, build then runtime, CPU variant on plain Debian/Ubuntu', () => {
  const { preamble, stages } = df();
  const names = stages.map((s) => s.name);
  assert.ok(names.includes('build') && names.at(-1) === 'runtime', `stages: ${names.join(', ')}`);
  const arg = (n: string) => preamble.find((i) => i.op === 'ARG' && i.args.startsWith(`${n}=`))?.args.split('=')[1];
  assert.match(arg('BUILD_BASE') ?? '', /^(debian|ubuntu):/);
  assert.match(arg('RUNTIME_BASE') ?? '', /^(debian|ubuntu):/);
  assert.equal(stages.find((s) => s.name === 'build')!.base, '${BUILD_BASE}');
  assert.equal(finalStage().base, '${RUNTIME_BASE}');
  // The TT engine is a build-arg: RFDETR_CMAKE_ARGS reaches scripts/build-sidecar.sh through the environment.
  const build = stages.find((s) => s.name === 'build')!;
  assert.ok(ops(build, 'ARG').some((i) => i.args.startsWith('RFDETR_CMAKE_ARGS=')));
  assert.ok(ops(build, 'ENV').some((i) => /RFDETR_CMAKE_ARGS=\$\{RFDETR_CMAKE_ARGS\}/.test(i.args)));
  assert.match(readText('Dockerfile'), /-DRFDETR_WITH_TTNN=ON/, 'the TT build is documented in the Dockerfile header');
});

test('Dockerfile: every RUN is a bash script from scripts/ that exists', () => {
  for (const stage of df().stages) {
    const copied = new Map<string, string>();
    for (const ins of stage.instructions) {
      if (ins.op === 'COPY' && !ins.args.startsWith('--from')) {
        const [src, dst] = ins.args.split(' ');
        if (src && dst) copied.set(dst, src);
      }
      if (ins.op !== 'RUN') continue;
      const m = /^bash (\S+\.sh)(?: .*)?$/.exec(ins.args);
      assert.ok(m, `RUN at line ${ins.line} is not 'bash <script>.sh ...': ${ins.args}`);
      const script = m[1]!.startsWith('/') ? copied.get(m[1]!) : m[1]!;
      assert.ok(script, `RUN at line ${ins.line} runs ${m[1]} which no earlier COPY in stage ${stage.name} put there`);
      assert.match(script, /^scripts\/[\w.-]+\.sh$/);
      assert.ok(fs.existsSync(path.join(packageRoot, script)), `${script} does not exist`);
    }
  }
});

test('Dockerfile: COPY sources exist, --from names a stage', () => {
  const { stages } = df();
  const names = new Set(stages.map((s) => s.name));
  for (const stage of stages) {
    for (const ins of ops(stage, 'COPY')) {
      const from = /^--from=(\S+) /.exec(ins.args);
      if (from) { assert.ok(names.has(from[1]!), `COPY --from=${from[1]} at line ${ins.line}: no such stage`); continue; }
      const src = ins.args.split(' ')[0]!;
      assert.ok(src === '.' || fs.existsSync(path.join(packageRoot, src)), `COPY ${src} at line ${ins.line}: no such file`);
    }
  }
});

test('Dockerfile: runtime runs as non-root rfdetr, exposes the port, health-checks readiness, ENTRYPOINT rfdetr serve', () => {
  const rt = finalStage();
  const user = ops(rt, 'USER');
  assert.equal(user.length, 1);
  assert.equal(user[0]!.args, 'rfdetr');
  assert.match(readText('scripts/container-runtime-setup.sh'), /useradd --system --uid "\$uid"/);
  const idx = (op: string) => rt.instructions.findIndex((i) => i.op === op);
  assert.ok(idx('USER') < idx('ENTRYPOINT'), 'USER comes before ENTRYPOINT');
  assert.deepEqual(ops(rt, 'EXPOSE').map((i) => i.args), [String(DEFAULT_PORT)]);
  assert.deepEqual(JSON.parse(ops(rt, 'ENTRYPOINT')[0]!.args), ['rfdetr', 'serve']);
  const cmd = JSON.parse(ops(rt, 'CMD')[0]!.args) as string[];
  assert.equal(cmd[cmd.indexOf('--port') + 1], String(DEFAULT_PORT));
  assert.equal(cmd[cmd.indexOf('--host') + 1], '0.0.0.0', 'inside a container the server must listen beyond loopback');
  const hc = ops(rt, 'HEALTHCHECK');
  assert.equal(hc.length, 1);
  const hcCmd = /CMD (\[.*\])$/.exec(hc[0]!.args);
  assert.ok(hcCmd, 'HEALTHCHECK CMD in exec form');
  assert.deepEqual(JSON.parse(hcCmd[1]!), ['node', '/opt/rfdetr/scripts/healthcheck.mjs']);
  assert.match(hc[0]!.args, /--start-period=\d+m/, 'a start period that covers a cold kernel compile');
  assert.ok(readText('scripts/healthcheck.mjs').includes(`http://127.0.0.1:${DEFAULT_PORT}${ROUTES.readiness}`));
  assert.deepEqual(ops(rt, 'STOPSIGNAL').map((i) => i.args), ['SIGTERM']);
  assert.ok(ops(rt, 'ENV').some((i) => /PATH=\/opt\/rfdetr\/bin:/.test(i.args)), 'rfdetr resolves from /opt/rfdetr/bin');
  // Weights are a pointer, never baked: no model file is copied into the image.
  assert.doesNotMatch(readText('Dockerfile'), /safetensors/);
});

test('.dockerignore: the context carries sources, not local builds or installs', () => {
  const lines = new Set(readText('.dockerignore').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#')));
  for (const p of ['.git', 'node_modules', 'sidecar/build', 'dist']) assert.ok(lines.has(p), `.dockerignore lacks ${p}`);
  for (const p of ['src', 'sidecar', 'scripts', 'test', 'package.json']) assert.ok(!lines.has(p), `.dockerignore must not drop ${p}`);
});
