// Engine facts come from the sidecar (`--list-engines`, the hello), not from lists kept here: a --precision
// the engine lacks is a usage error before anything starts, naming the engine's precisions; without
// --precision the engine's default applies; /info reports what the engine's hello says it runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { execa } from 'execa';
import { packageRoot } from '../../src/config/paths.ts';
import { parseEngineList, sidecarEngines } from '../../cli/sidecar-info.ts';
import { caseImage, runInProcess } from './helpers.ts';
import { FakeBackend, start } from '../http/helpers.ts';

const rfdetr = path.join(packageRoot, 'bin', 'rfdetr.js');

test('--list-engines: each engine\'s precisions (default first), default and host use are parsed; a list without them is not trusted', () => {
  const list = parseEngineList(JSON.stringify({ engines: [
    { name: 'cpu', built: true, precisions: ['fp32', 'int8'], default_precision: 'fp32', host_cores: true },
    { name: 'tt', built: false, precisions: ['bf16'], default_precision: 'bf16', host_cores: false, unbuilt_reason: 'build it with ttnn' },
  ] }));
  assert.ok(list);
  assert.deepEqual(list.built, ['cpu']);
  assert.deepEqual([...list.unbuilt], [['tt', 'build it with ttnn']]);
  assert.deepEqual(list.engines.get('tt'), { name: 'tt', built: false, precisions: ['bf16'], defaultPrecision: 'bf16', hostCores: false, unbuiltReason: 'build it with ttnn' });
  // A sidecar from before the facts (names only), a default it does not run, or not JSON at all.
  assert.equal(parseEngineList(JSON.stringify({ engines: [{ name: 'cpu', built: true }] })), null);
  assert.equal(parseEngineList(JSON.stringify({ engines: [{ name: 'cpu', built: true, precisions: ['fp32'], default_precision: 'bf16', host_cores: true }] })), null);
  assert.equal(parseEngineList('cpu tt-host'), null);
});

test('this build\'s sidecar lists the engines\' facts: cpu fp32/int8/bf16 and tt-host fp32/bf16 on the host, tt bf16 on a card', async () => {
  const list = await sidecarEngines();
  assert.ok(list, 'the sidecar is built (npm install)');
  const facts = (name: string) => {
    const e = list.engines.get(name);
    return e && [e.precisions, e.defaultPrecision, e.hostCores];
  };
  assert.deepEqual(facts('cpu'), [['fp32', 'int8', 'bf16'], 'fp32', true]);
  assert.deepEqual(facts('tt-host'), [['fp32', 'bf16'], 'fp32', true]);
  assert.deepEqual(facts('tt'), [['bf16'], 'bf16', false]);
});

test('a --precision the engine lacks is a usage error (exit 2) naming its precisions, for every engine command, before an engine starts', async () => {
  for (const argv of [['detect', caseImage('case-1')], ['bench'], ['verify'], ['serve', '--port', '0']]) {
    const r = await runInProcess([argv[0]!, '--engine', 'tt-host', '--precision', 'int8', ...argv.slice(1)]);
    assert.equal(r.code, 2, `${argv[0]}: ${r.stderr}`);
    assert.match(r.stderr, /--precision "int8": the tt-host engine runs fp32 \(default\), bf16; pick one of those, or leave --precision out for its default/, argv[0]);
    assert.equal(r.requests.length, 0, `${argv[0]}: no engine was started`);
  }
  // A precision the engine has goes to it as given; none given is the engine's own default (no flag sent).
  const ok = await runInProcess(['detect', '--engine', 'cpu', '--precision', 'int8', caseImage('case-1')]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.deepEqual(ok.requests.map((q) => q.precision), ['int8']);
  const dflt = await runInProcess(['detect', '--engine', 'cpu', caseImage('case-1')]);
  assert.equal(dflt.code, 0, dflt.stderr);
  assert.deepEqual(dflt.requests.map((q) => q.precision), [undefined]);
});

test('rfdetr serve --engine tt-host --precision int8: exit 2 from the real CLI, naming fp32 and bf16', async () => {
  const r = await execa(process.execPath, [rfdetr, 'serve', '--engine', 'tt-host', '--precision', 'int8', '--port', '0'], { reject: false });
  assert.equal(r.exitCode, 2, r.stderr);
  assert.match(r.stderr, /the tt-host engine runs fp32 \(default\), bf16/);
  assert.doesNotMatch(r.stderr, /"event":"listening"|starting the .* engine/);
});

test('/info: device_params.precision is what the engine\'s hello says it runs, not the flag', async () => {
  const backend = new FakeBackend();
  backend.info = { ...backend.info!, precision: 'bf16' };
  const s = await start({ backend, deviceParams: { engine: 'fake', threads: 0, precision: 'fp32' } });
  try {
    const b = (await (await fetch(`${s.url}/info`)).json()) as { device_params: Record<string, unknown> };
    assert.equal(b.device_params.precision, 'bf16');
    assert.deepEqual(Object.keys(b.device_params), ['engine', 'device', 'input_shape', 'threads', 'precision'], 'the key keeps its place');
  } finally {
    await s.stop();
  }
});
