// `--engine tt` on a build without tt-metal support: a startup failure that says how to build it, and never
// a silent fall-back to another engine (no READY line).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execa } from 'execa';
import { sidecarBinary } from '../../src/config/paths.ts';
import { skipOrFail } from '../helpers/skip.ts';
import { sidecarEngines } from '../../cli/sidecar-info.ts';

test('rfdetr-sidecar --engine tt without ttnn: exit 1, how to build it, no READY', async (t) => {
  const list = await sidecarEngines();
  assert.ok(list, `${sidecarBinary()} --list-engines answered a JSON engine list`);
  if (list.built.includes('tt')) return skipOrFail(t, 'this sidecar was built with RFDETR_WITH_TTNN=ON');
  assert.ok(list.built.includes('cpu') && list.built.includes('tt-host'), `built list: ${list.built.join(', ')}`);
  assert.match(list.unbuilt.get('tt') ?? '', /RFDETR_WITH_TTNN=ON/, 'the list says how to build tt');
  const r = await execa(sidecarBinary(), ['--engine', 'tt', '--weights', '/nonexistent', '--socket', '/tmp/rfdetr-tt-unbuilt.sock'], { reject: false, timeout: 30_000 });
  assert.equal(r.exitCode, 1);
  assert.equal(r.stdout, '', 'nothing on stdout: no READY line');
  assert.match(r.stderr, /built without Tenstorrent support/);
  assert.match(r.stderr, /RFDETR_CMAKE_ARGS='-DRFDETR_WITH_TTNN=ON'/);
  assert.doesNotMatch(r.stderr, /READY/);
});
