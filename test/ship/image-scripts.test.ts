// scripts/image-build.sh and scripts/image-smoke.sh refuse a missing or unknown argument with their usage and exit 2
// before they touch anything: a PATH whose container engine, apt-get, mmdebstrap and pip are stand-ins that
// record being called shows nothing was run. (The build and the smoke themselves are run by hand or by CI:
// SERVING.md, "Container image".)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { packageRoot } from '../../src/config/paths.ts';

let tmp = '';
let bin = '';
let calls = '';

before(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-image-args-'));
  bin = path.join(tmp, 'bin');
  calls = path.join(tmp, 'calls');
  fs.mkdirSync(bin);
  for (const tool of ['podman', 'docker', 'apt-get', 'mmdebstrap', 'python3', 'runc']) {
    fs.writeFileSync(path.join(bin, tool), `#!/bin/sh\necho "${tool} $*" >> "${calls}"\nexit 0\n`, { mode: 0o755 });
  }
});
after(() => { if (tmp) fs.rmSync(tmp, { recursive: true, force: true }); });

function run(script: string, args: string[]) {
  fs.rmSync(calls, { force: true });
  const r = spawnSync('bash', [path.join(packageRoot, 'scripts', script), ...args], {
    cwd: packageRoot, encoding: 'utf8', env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
  });
  const ran = fs.existsSync(calls) ? fs.readFileSync(calls, 'utf8') : '';
  return { ...r, ran };
}

for (const script of ['image-build.sh', 'image-smoke.sh']) {
  test(`${script}: no argument, an unknown one or two are a usage error (exit 2) that runs nothing`, () => {
    for (const args of [[], ['gpu'], ['cpu', 'tt'], ['--tag']]) {
      const r = run(script, args);
      assert.equal(r.status, 2, `${script} ${args.join(' ')}: exit ${r.status}, stderr ${r.stderr}`);
      assert.match(r.stderr, new RegExp(`usage: scripts/${script.replace('.', '\\.')} cpu\\|tt `), `${script} ${args.join(' ')}: usage on stderr`);
      assert.equal(r.ran, '', `${script} ${args.join(' ')} ran tools before checking its argument:\n${r.ran}`);
    }
    const unknown = run(script, ['gpu']);
    assert.match(unknown.stderr, /unknown image 'gpu'/, 'the bad value is named');
  });

  test(`${script}: --help prints the usage on stdout and exits 0, running nothing`, () => {
    const r = run(script, ['--help']);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^usage: scripts\/image-(build|smoke)\.sh cpu\|tt/);
    assert.equal(r.ran, '');
  });
}

test('smoke-http.mjs: a missing command or argument is a usage error (exit 2)', () => {
  const helper = path.join(packageRoot, 'scripts', 'image', 'smoke-http.mjs');
  for (const args of [[], ['ready'], ['ready', 'http://127.0.0.1:1'], ['predict', 'http://127.0.0.1:1'], ['nope', 'http://127.0.0.1:1']]) {
    const r = spawnSync(process.execPath, [helper, ...args], { encoding: 'utf8' });
    assert.equal(r.status, 2, `smoke-http.mjs ${args.join(' ')}: exit ${r.status}, stderr ${r.stderr}`);
    assert.match(r.stderr, /^usage: smoke-http\.mjs ready URL SECONDS/);
  }
});
