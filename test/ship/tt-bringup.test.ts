// scripts/tt-bringup.sh on a host without a card: it says so and exits 1 before running anything (no report
// file); with a card present but a sidecar built without the tt engine it gets past the card check and stops
// at the build check, naming how to build it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { packageRoot } from '../../src/config/paths.ts';

const script = path.join(packageRoot, 'scripts', 'tt-bringup.sh');

test('tt-bringup: no card → "no Tenstorrent card", exit 1, nothing run or written', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-bringup-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const cards = path.join(dir, 'dev');
  const r = await execa('bash', [script, path.join(dir, 'report.txt')], { reject: false, env: { RFDETR_TT_DEVICE_DIR: cards } });
  assert.equal(r.exitCode, 1, r.stderr);
  assert.match(r.stderr, /no Tenstorrent card on this host: .*dev has no devices/);
  assert.match(r.stderr, /nothing was run/);
  assert.deepEqual(readdirSync(dir), [], 'no report without a card');
});

test('tt-bringup: a card but a sidecar without the tt engine → exit 1 naming the build, no report', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-bringup-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(path.join(dir, '0'), '');
  const r = await execa('bash', [script, path.join(dir, 'report.txt')], {
    reject: false, env: { RFDETR_TT_DEVICE_DIR: dir, RFDETR_SIDECAR: path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test') },
  });
  assert.equal(r.exitCode, 1, r.stderr);
  assert.doesNotMatch(r.stderr, /no Tenstorrent card/);
  assert.match(r.stderr, /has no tt engine/);
  assert.match(r.stderr, /-DRFDETR_WITH_TTNN=ON/);
  assert.deepEqual(readdirSync(dir), ['0']);
});
