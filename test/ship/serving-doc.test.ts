// SERVING.md is the operator's manual: it names every flag and environment variable the product reads, the
// gates and pins operators check against, and nothing from another machine. When the sidecar is built, its
// own --help is the source the flag table must agree with.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawnSync } from 'node:child_process';
import { sidecarBinary } from '../../src/config/paths.ts';
import { readText, serverRoutes, skipOrFail } from './ship-helpers.ts';

const doc = () => readText('SERVING.md');

test('SERVING.md: every environment variable the serving world sets is documented', () => {
  const d = doc();
  for (const v of ['HF_MODEL', 'TT_WEIGHTS_REVISION', 'TT_MODEL_WEIGHTS_REVISION', 'TT_RF_DETR_WEIGHTS', 'HF_HOME', 'HF_HUB_CACHE',
    'HF_ENDPOINT', 'HF_TOKEN', 'HF_HUB_OFFLINE', 'TT_MESH_SHAPE', 'TT_DEVICE_ID', 'TT_METAL_VISIBLE_DEVICES', 'MESH_DEVICE',
    'RFDETR_SOCKET', 'RFDETR_ENGINE', 'RFDETR_THREADS', 'RFDETR_CMAKE_ARGS', 'TT_METAL_CACHE']) {
    assert.ok(d.includes(`\`${v}\``), `SERVING.md does not document ${v}`);
  }
});

test('SERVING.md: every rfdetr serve flag is documented', () => {
  const d = doc();
  for (const f of ['--host', '--port', '--weights', '--engine', '--threads', '--queue-size', '--deadline-ms', '--sidecar-socket', '--log-level']) {
    assert.match(d, new RegExp(`\\| \`${f}[ \`]`), `SERVING.md's serve table lacks ${f}`);
  }
});

test('SERVING.md: the sidecar flag table matches rfdetr-sidecar --help', (t) => {
  const bin = sidecarBinary();
  if (!fs.existsSync(bin)) return skipOrFail(t, `${bin} is not built (sidecar branch not merged / npm install not run)`);
  const help = spawnSync(bin, ['--help'], { encoding: 'utf8' });
  const flags = new Set([...(help.stdout + help.stderr).matchAll(/^\s+(--[a-z-]+)/gm)].map((m) => m[1]!));
  flags.delete('--help');
  assert.ok(flags.size >= 5, `could not read flags from --help:\n${help.stdout}`);
  const section = doc().split('### `rfdetr-sidecar`')[1]!.split('###')[0]!;
  const documented = new Set([...section.matchAll(/^\| `(--[a-z-]+)/gm)].map((m) => m[1]!));
  assert.deepEqual([...documented].sort(), [...flags].sort());
});

test('SERVING.md: the pins, gates and demo operators check against', () => {
  const d = doc();
  for (const s of ['7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a', 'v0.78.0-dev20260820-25', '8b98410e730', '98.5',
    'http://images.cocodataset.org/val2017/000000039769.jpg', 'cat 0.96 / 0.93, remote 0.90 / 0.73,\ncouch 0.67',
    'rfdetr verify --engine tt', 'rfdetr-serve ready: Application startup complete', 'written and reviewed, not built', 'Batch 1', 'shape-locked to the variant\'s input', 'Base 560×560',
    'serialised per engine', 'ENTRYPOINT ["rfdetr", "serve"]']) {
    assert.ok(d.includes(s), `SERVING.md lacks ${JSON.stringify(s)}`);
  }
});

test('SERVING.md: no paths or hosts from the seeds\' machine', () => {
  const d = doc();
  for (const bad of [/deepgadget/i, /\/home\/\w+/, /experiments\//, /gbp-tt/, /changh95\/rf-detr-p150/]) assert.doesNotMatch(d, bad);
});

test('SERVING.md: the route table lists every route the server serves', async (t) => {
  const routes = await serverRoutes();
  if (!routes) return skipOrFail(t, 'src/http is not on this branch yet (HTTP branch not merged)');
  const table = doc().split('### Routes')[1]!.split('###')[0]!;
  for (const r of routes) assert.match(table, new RegExp(`\`(GET|POST) ${r.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\``), `SERVING.md's route table lacks ${r}`);
});
