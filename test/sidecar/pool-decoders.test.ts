// SidecarPool.decodes(): true only when every serving member's sidecar decodes the format, since the member is
// picked when the request is sent. Against the real test sidecar (decodes jpeg and png) and the scripted fake,
// which answers `decoders` as an older sidecar does (E_UNKNOWN_OP).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { packageRoot } from '../../src/config/paths.ts';
import { createPool, type SidecarBackendOptions } from '../../src/sidecar/index.ts';

const testBinary = path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test');
const fakePath = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fake-sidecar.ts');

function pool(t: { after: (fn: () => unknown) => void }, kinds: ('real' | 'old')[]) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-pool-dec-'));
  const members = kinds.map((k, i): SidecarBackendOptions & { label: string } => ({
    label: `worker-${i}`, engine: 'test-echo', weightsDir: dir, restart: { initialDelayMs: 20 },
    command: k === 'real' ? { file: testBinary } : { file: process.execPath, args: ['--import', 'tsx', fakePath] },
  }));
  const p = createPool({ members, minReady: kinds.length });
  t.after(() => {
    p.destroy();
    rmSync(dir, { recursive: true, force: true });
  });
  return p;
}

test('pool.decodes(): false until its members have answered, then true when every serving member decodes the format', async (t) => {
  const p = pool(t, ['real', 'real']);
  await p.ready(60_000);
  assert.equal(p.decodes('png'), false);
  await p.decodersKnown();
  assert.equal(p.decodes('png'), true);
  assert.equal(p.decodes('jpeg'), true);
});

test('pool.decodes(): one member on an older sidecar (E_UNKNOWN_OP) makes it false for the pool', async (t) => {
  const p = pool(t, ['real', 'old']);
  await p.ready(60_000);
  assert.equal(p.decodes('png'), false);
  await p.decodersKnown();
  assert.equal(p.member('worker-0')!.decodes('png'), true, 'the real sidecar decodes png');
  assert.equal(p.member('worker-1')!.decodes('png'), false, 'the older one does not');
  assert.equal(p.decodes('png'), false);
});
