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

// image-build.sh tt where GitHub does not answer (git ls-remote fails): it builds against the tarball of
// RFDETR_TTNN_SDK with the 0.70.1 wheel, says so, labels the image, and leaves nothing staged; with no tarball
// it stops before building. The stand-in podman records the build's arguments and what was staged then.
function ttBuild(sdk: string) {
  const fake = fs.mkdtempSync(path.join(tmp, 'tt-bin-'));
  fs.writeFileSync(path.join(fake, 'git'), `#!/bin/sh\n[ "$1" = ls-remote ] && { echo "git $*" >> "${calls}"; exit 2; }\nexec ${spawnSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).stdout.trim()} "$@"\n`, { mode: 0o755 });
  fs.writeFileSync(path.join(fake, 'podman'), `#!/bin/sh\necho "podman $*" >> "${calls}"\n[ "$1" = build ] && echo "staged: $(ls scripts/image/ttnn-headers | tr '\\n' ' ')" >> "${calls}"\nexit 0\n`, { mode: 0o755 });
  fs.rmSync(calls, { force: true });
  const r = spawnSync('bash', [path.join(packageRoot, 'scripts', 'image-build.sh'), 'tt'], {
    cwd: packageRoot, encoding: 'utf8', env: { ...process.env, PATH: `${fake}:${bin}:${process.env.PATH}`, RFDETR_TTNN_SDK: sdk, RFDETR_CONTAINER_ENGINE: 'podman' },
  });
  return { ...r, ran: fs.existsSync(calls) ? fs.readFileSync(calls, 'utf8') : '' };
}

test('image-build.sh tt without GitHub: the shared headers tarball with the 0.70.1 wheel, said and labelled, nothing left staged', () => {
  const sdk = fs.mkdtempSync(path.join(tmp, 'sdk-'));
  fs.writeFileSync(path.join(sdk, 'tt-metal-headers-test0.tar.xz'), 'not read by the stand-in');
  const r = ttBuild(sdk);
  const build = r.ran.split('\n').find((l) => l.startsWith('podman build ') && !l.includes('--target')) ?? '';
  assert.ok(build, `no podman build ran: ${r.ran}\n${r.stderr}`);
  for (const arg of ['--build-arg RFDETR_TTNN_VERSION=0.70.1', '--build-arg RFDETR_TTNN_HEADERS_TARBALL=tt-metal-headers-test0.tar.xz',
    '--label rfdetr.ttnn-linked=0.70.1', '-DRFDETR_TTNN_VERSION=0.70.1', '--build-arg RFDETR_COMMIT=']) {
    assert.ok(build.includes(arg), `the build lacks ${arg}: ${build}`);
  }
  assert.ok(!/BUILD_BASE=ubuntu/.test(build), `debian bases here, not ubuntu: ${build}`);
  assert.match(r.ran, /staged: .*tt-metal-headers-test0\.tar\.xz/, 'the tarball is in the build context while podman builds');
  assert.match(r.stderr, /This image is LINKED AGAINST ttnn 0\.70\.1, not the serving pin 0\.78\.0/);
  assert.ok(!fs.existsSync(path.join(packageRoot, 'scripts/image/ttnn-headers/tt-metal-headers-test0.tar.xz')), 'the staged tarball was left in the checkout');
});

test('image-build.sh tt without GitHub and without a headers tarball: exit 1 naming both sources, nothing built', () => {
  const empty = fs.mkdtempSync(path.join(tmp, 'sdk-empty-'));
  const r = ttBuild(empty);
  assert.equal(r.status, 1, r.stderr);
  assert.match(r.stderr, /tt-metal's v0\.78\.0 tag from https:\/\/github\.com\/tenstorrent\/tt-metal/);
  assert.match(r.stderr, /tt-metal-headers-\*\.tar\.xz in .*sdk-empty-\w+ \(none there; set\nimage-build: RFDETR_TTNN_SDK/);
  assert.ok(!r.ran.includes('podman build'), `built anyway: ${r.ran}`);
});

test('image/tt-model-verify.sh: no tag, two, an option, or no ENGINE are a usage error (exit 2) that runs nothing', () => {
  const verify = path.join(packageRoot, 'scripts', 'image', 'tt-model-verify.sh');
  for (const [args, env] of [[[], { ENGINE: 'podman' }], [['a', 'b'], { ENGINE: 'podman' }], [['--help'], { ENGINE: 'podman' }], [['rfdetr-serve:tt'], { ENGINE: '' }], [['rfdetr-serve:tt'], { ENGINE: 'lxc' }]] as const) {
    fs.rmSync(calls, { force: true });
    const r = spawnSync('bash', [verify, ...args], { cwd: packageRoot, encoding: 'utf8', env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, ...env } });
    assert.equal(r.status, 2, `tt-model-verify.sh ${args.join(' ')} (ENGINE=${env.ENGINE}): exit ${r.status}, stderr ${r.stderr}`);
    assert.match(r.stderr, args.length === 1 && args[0] !== '--help' ? /ENGINE='.*'; expected podman or docker/ : /^usage: scripts\/image\/tt-model-verify\.sh TAG/);
    assert.equal(fs.existsSync(calls) ? fs.readFileSync(calls, 'utf8') : '', '', 'nothing was run');
  }
});

test('smoke-http.mjs: a missing command or argument is a usage error (exit 2)', () => {
  const helper = path.join(packageRoot, 'scripts', 'image', 'smoke-http.mjs');
  for (const args of [[], ['ready'], ['ready', 'http://127.0.0.1:1'], ['predict', 'http://127.0.0.1:1'], ['nope', 'http://127.0.0.1:1']]) {
    const r = spawnSync(process.execPath, [helper, ...args], { encoding: 'utf8' });
    assert.equal(r.status, 2, `smoke-http.mjs ${args.join(' ')}: exit ${r.status}, stderr ${r.stderr}`);
    assert.match(r.stderr, /^usage: smoke-http\.mjs ready URL SECONDS/);
  }
});
