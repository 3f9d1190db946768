// bin/rfdetr.js runs the compiled JavaScript (compiled/, `npm run build:cli`, part of `npm install` and of
// `npm test`'s pretest) when it is up to date, without loading tsx, and it answers as the TypeScript sources do.
// compiled/ missing or older than the sources is a failure, not a skip: the repository builds it. The start-up
// time it buys is a bench's figure (bench/cli-startup/RESULTS.md), not asserted here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { packageRoot } from '../../src/config/paths.ts';
import { binPath, importRecorder } from './helpers.ts';

function newestSource(): number {
  let newest = 0;
  for (const d of ['cli', 'src']) {
    for (const f of fs.readdirSync(path.join(packageRoot, d), { recursive: true, encoding: 'utf8' })) {
      if (f.endsWith('.ts')) newest = Math.max(newest, fs.statSync(path.join(packageRoot, d, f)).mtimeMs);
    }
  }
  return newest;
}

const stamp = path.join(packageRoot, 'compiled', '.built');
const unbuilt = !fs.existsSync(stamp) ? 'compiled/ is not built'
  : fs.statSync(stamp).mtimeMs < newestSource() ? 'compiled/ is older than the sources' : null;

test('bin/rfdetr.js runs the compiled CLI when it is fresh, without tsx, answering as the sources do', async (t) => {
  assert.equal(unbuilt, null, `${unbuilt}: build it with npm run build:cli (npm install and npm test do)`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-compiled-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const { register } = importRecorder(dir);
  const { RFDETR_FROM_SOURCE: _, ...env } = process.env;
  for (const args of [['--version'], ['--help'], ['detect', '--help']]) {
    const log = path.join(dir, `${args.join('_')}.log`);
    fs.writeFileSync(log, '');
    const compiled = await execa(process.execPath, ['--import', register, binPath, ...args], { reject: false, extendEnv: false, env: { ...env, RFDETR_IMPORT_LOG: log } });
    const loaded = fs.readFileSync(log, 'utf8').split('\n').map((l) => l.split(' ').pop() ?? '');
    assert.ok(loaded.some((u) => u.includes('/compiled/cli/main.js')), `${args.join(' ')}: the compiled main was loaded`);
    assert.ok(!loaded.some((u) => /\/node_modules\/tsx\//.test(u) || u.endsWith('.ts')), `${args.join(' ')}: neither tsx nor a .ts file was loaded`);
    const sources = await execa(process.execPath, [binPath, ...args], { reject: false, extendEnv: false, env: { ...env, RFDETR_FROM_SOURCE: '1' } });
    assert.equal(compiled.exitCode, sources.exitCode);
    assert.equal(compiled.stdout, sources.stdout, `${args.join(' ')}: the same answer`);
  }
});
