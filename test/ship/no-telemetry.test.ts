// No telemetry at install: swagger-ui-dist depends on @scarf/scarf, whose postinstall reports the install to
// scarf.sh unless the root package.json opts out. Its postinstall is run here as npm runs it (INIT_CWD = the
// package root), pointed at a listener on 127.0.0.1 (its SCARF_LOCAL_PORT), which must receive nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { execa } from 'execa';
import { packageRoot } from '../../src/config/paths.ts';
import { skipOrFail } from '../helpers/skip.ts';

test('the @scarf/scarf postinstall reports nothing (package.json scarfSettings.enabled = false)', async (t) => {
  const report = path.join(packageRoot, 'node_modules', '@scarf', 'scarf', 'report.js');
  if (!fs.existsSync(report)) return skipOrFail(t, '@scarf/scarf is not installed (swagger-ui-dist no longer depends on it?)');
  assert.equal(JSON.parse(fs.readFileSync(path.join(packageRoot, 'package.json'), 'utf8')).scarfSettings?.enabled, false);
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    const port = (server.address() as AddressInfo).port;
    const env: NodeJS.ProcessEnv = { ...process.env, INIT_CWD: packageRoot, SCARF_LOCAL_PORT: String(port), SCARF_VERBOSE: 'true' };
    for (const k of ['SCARF_ANALYTICS', 'SCARF_NO_ANALYTICS', 'DO_NOT_TRACK']) delete env[k];
    const r = await execa(process.execPath, [report], { cwd: path.dirname(report), env, reject: false, timeout: 60_000 });
    assert.equal(r.exitCode, 0, r.stderr);
    assert.deepEqual(hits, [], 'no request reached the reporting endpoint');
    assert.match(`${r.stdout}\n${r.stderr}`, /opted out|has been disabled/i, 'scarf saw the opt-out');
  } finally {
    server.close();
  }
});
