// `--engine tt` on a build without tt-metal support: a startup failure that says how to build it, and never
// a silent fall-back to another engine (no READY line).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execa } from 'execa';
import { sidecarBinary } from '../../src/config/paths.ts';

test('rfdetr-sidecar --engine tt without ttnn: exit 1, how to build it, no READY', async (t) => {
  const help = await execa(sidecarBinary(), ['--help'], { reject: false });
  const built = /built: ([^)\n]*)/.exec(help.stdout)?.[1]?.split('|') ?? [];
  if (built.includes('tt')) return t.skip('this sidecar was built with RFDETR_WITH_TTNN=ON');
  assert.ok(built.includes('cpu') && built.includes('tt-host'), `built list: ${built.join(', ')}`);
  const r = await execa(sidecarBinary(), ['--engine', 'tt', '--weights', '/nonexistent', '--socket', '/tmp/rfdetr-tt-unbuilt.sock'], { reject: false, timeout: 30_000 });
  assert.equal(r.exitCode, 1);
  assert.equal(r.stdout, '', 'nothing on stdout: no READY line');
  assert.match(r.stderr, /built without Tenstorrent support/);
  assert.match(r.stderr, /RFDETR_CMAKE_ARGS='-DRFDETR_WITH_TTNN=ON'/);
  assert.doesNotMatch(r.stderr, /READY/);
});
