// `rfdetr --help` and `--version` answer without loading the heavy modules (execa ~0.25 s of CPU to import,
// sharp, undici, express, prom-client): a resolve hook registered before the CLI records every bare import. The
// same hook on a command that does its work (smoke, which fetches) must record some, or the hook proves nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { binPath } from './helpers.ts';

// msgpackr is not listed: --version needs PROTOCOL_VERSION from src/protocol/codec.ts, and msgpackr imports in ~20 ms.
const HEAVY = ['execa', 'sharp', 'undici', 'express', 'prom-client', 'busboy', 'yaml'];

test('--help, --version and a command\'s --help load none of the heavy modules', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-lazy-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const hooks = path.join(dir, 'hooks.mjs');
  const register = path.join(dir, 'register.mjs');
  fs.writeFileSync(hooks, `import fs from 'node:fs';
export async function resolve(spec, context, next) {
  if (${JSON.stringify(HEAVY)}.includes(spec)) fs.appendFileSync(process.env.RFDETR_IMPORT_LOG, spec + '\\n');
  return next(spec, context);
}
`);
  fs.writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(`file://${hooks}`)});\n`);
  const imported = async (args: string[]) => {
    const log = path.join(dir, `${args.join('_').replace(/[^\w-]/g, '_')}.log`);
    fs.writeFileSync(log, '');
    const r = await execa(process.execPath, ['--import', register, binPath, ...args], { reject: false, env: { ...process.env, RFDETR_IMPORT_LOG: log } });
    return { r, heavy: [...new Set(fs.readFileSync(log, 'utf8').split('\n').filter(Boolean))] };
  };
  for (const args of [['--help'], ['--version'], ['detect', '--help'], ['serve', '--help'], ['weights', '--help']]) {
    const { r, heavy } = await imported(args);
    assert.equal(r.exitCode, 0, `${args.join(' ')}: ${r.stderr}`);
    assert.match(String(r.stdout), args[0] === '--version' ? /^rfdetr-serve \d/ : /Usage: rfdetr/);
    assert.deepEqual(heavy, [], `rfdetr ${args.join(' ')} imported heavy modules`);
  }
  // Nobody listens on port 9: smoke loads its HTTP client, fails to connect and exits 1.
  const control = await imported(['smoke', '--url', 'http://127.0.0.1:9']);
  assert.equal(control.r.exitCode, 1, String(control.r.stdout) + String(control.r.stderr));
  assert.notDeepEqual(control.heavy, [], 'the hook recorded no heavy import even for a command that runs');
});
