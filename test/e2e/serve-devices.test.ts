// `rfdetr serve --devices` end to end: the CLI with the test sidecar's card stand-in (test-sleep) on a card
// directory that has cards 0 and 1 but not 2. /health and /info list each device with its state; card 2 is
// reported by device and taken out while 0 and 1 serve; /metrics carries the device label; SIGTERM drains all
// and exits 0. Flags the engine cannot use are usage errors (exit 2).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { packageRoot } from '../../src/config/paths.ts';
import { synthWeights } from '../helpers/synth-weights.ts';
import { waitFor } from '../helpers/wait-for.ts';

const testBinary = path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test');
const rfdetr = path.join(packageRoot, 'bin', 'rfdetr.js');

const until = <T>(what: string, get: () => Promise<T | undefined>) => waitFor(what, get, 120_000);

test('rfdetr serve --devices 0,1,2 (card 2 missing): each device listed, 2 taken out, 0 and 1 serve, SIGTERM drains', async (t) => {
  assert.ok(existsSync(testBinary), `${testBinary} is not built: run npm install`);
  const weights = await synthWeights(1n);
  const root = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-serve-devices-'));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const dev = path.join(root, 'dev');
  mkdirSync(dev);
  for (const c of ['0', '1']) writeFileSync(path.join(dev, c), '');
  const child = execa(process.execPath, [rfdetr, 'serve', '--engine', 'test-sleep', '--devices', '0,1,2', '--weights', weights, '--port', '0', '--log-level', 'info'], {
    env: { RFDETR_SIDECAR: testBinary, RFDETR_TT_DEVICE_DIR: dev, RFDETR_TEST_FORWARD_MS: '5', TT_METAL_CACHE: path.join(root, 'cache') },
    reject: false, buffer: false,
  });
  let log = '';
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  t.after(() => child.kill('SIGKILL'));
  const url = await until('the listening line', async () => /"event":"listening","url":"([^"]+)"/.exec(log)?.[1]);
  await until('/ready 200', async () => ((await fetch(`${url}/ready`)).status === 200 ? true : undefined));
  const health = await until('device 2 reported', async () => {
    const h = (await (await fetch(`${url}/health`)).json()) as { status: string; devices: { device: string; state: string; removed: boolean; last_failure: string | null }[] };
    return h.devices.find((d) => d.device === '2')?.state === 'failed' && h.devices.filter((d) => d.state === 'ready').length === 2 ? h : undefined;
  });
  assert.equal(health.status, 'ok');
  assert.deepEqual(health.devices.map((d) => [d.device, d.state, d.removed]), [['0', 'ready', false], ['1', 'ready', false], ['2', 'failed', true]]);
  assert.match(health.devices[2]!.last_failure!, /could not open Tenstorrent device 2/);
  const info = (await (await fetch(`${url}/info`)).json()) as { devices: { device: string }[]; device_params: { devices: string[]; min_ready_devices: number; precision: string } };
  assert.deepEqual(info.device_params.devices, ['0', '1', '2']);
  assert.equal(info.device_params.precision, 'fp32', 'no --precision: the engine\'s default, as its hello says');
  assert.equal(info.device_params.min_ready_devices, 1);
  assert.equal(info.devices.length, 3);
  const png = (await import('node:fs')).readFileSync(path.join(packageRoot, 'test', 'fixtures', 'rfdetr-synth', 'case-1', 'input.png'));
  for (let i = 0; i < 4; i++) {
    const r = await fetch(`${url}/predict`, { method: 'POST', headers: { 'content-type': 'image/png' }, body: png });
    assert.equal(r.status, 200, await r.text());
  }
  const metrics = await (await fetch(`${url}/metrics`)).text();
  assert.match(metrics, /^rfdetr_devices_removed_total 1$/m);
  assert.match(metrics, /^rfdetr_device_state\{device="2",state="failed"\} 1$/m);
  assert.match(metrics, /^rfdetr_device_forwards_total\{device="0"\} [1-9]/m);
  assert.match(log, /device 2 taken out of the pool: .*could not open Tenstorrent device 2/);
  child.kill('SIGTERM');
  const done = await child;
  assert.equal(done.exitCode, 0, log.slice(-2000));
  assert.match(log, /"event":"drained"/);
});

test('rfdetr serve: --devices with a host engine, --workers with a card engine (both from --list-engines), a malformed list, --devices with --workers, and too many --min-ready-devices are usage errors (exit 2)', async () => {
  const run = (args: string[]) => execa(process.execPath, [rfdetr, 'serve', ...args], { reject: false, env: { RFDETR_SIDECAR: testBinary } });
  const cpu = await run(['--engine', 'cpu', '--devices', '0', '--weights', os.tmpdir()]);
  assert.equal(cpu.exitCode, 2, cpu.stderr);
  assert.match(cpu.stderr, /use --workers N/);
  const bad = await run(['--devices', '0,zero']);
  assert.equal(bad.exitCode, 2, bad.stderr);
  assert.match(bad.stderr, /expected card indices separated by commas/);
  const tt = await run(['--engine', 'test-sleep', '--devices', '0', '--workers', '2']);
  assert.equal(tt.exitCode, 2, tt.stderr);
  assert.match(tt.stderr, /cannot be combined/);
  const card = await run(['--engine', 'test-sleep', '--workers', '2']);
  assert.equal(card.exitCode, 2, card.stderr);
  assert.match(card.stderr, /--workers: the test-sleep engine runs on a card; use --devices LIST/);
  const many = await run(['--engine', 'test-echo', '--workers', '2', '--min-ready-devices', '3']);
  assert.equal(many.exitCode, 2, many.stderr);
  assert.match(many.stderr, /--min-ready-devices 3: expected at most 2/);
});
