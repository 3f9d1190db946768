// /info's device_params: with --workers N at the default --threads 0 each sidecar's own share of the cores is
// listed (the flag's 0 alone hid it); an explicit --threads N is each worker's; cards and a single sidecar
// carry no per-sidecar list.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deviceParamsFor } from '../../cli/commands/serve-device-params.ts';
import { planMembers } from '../../src/sidecar/devices.ts';

const pool = (r: Parameters<typeof planMembers>[0]) => ({ members: planMembers(r), minReady: 1 });

test('device_params: --workers 3 --threads 0 on 8 cores lists 3, 3, 2 threads per sidecar', () => {
  const p = deviceParamsFor({ engine: 'cpu' }, pool({ engine: 'cpu', hostCores: true, workers: 3, env: {}, cores: () => 8 }));
  assert.equal(p.threads, 0);
  assert.deepEqual(p.threads_per_sidecar, [3, 3, 2]);
  assert.deepEqual(p.devices, ['worker-0', 'worker-1', 'worker-2']);
});

test('device_params: --workers 2 --threads 4 gives each sidecar 4', () => {
  const p = deviceParamsFor({ engine: 'cpu', threads: 4 }, pool({ engine: 'cpu', hostCores: true, workers: 2, threads: 4, env: {}, cores: () => 8 }));
  assert.deepEqual(p.threads_per_sidecar, [4, 4]);
});

test('device_params: one sidecar, or cards, carry no per-sidecar list', () => {
  assert.equal('threads_per_sidecar' in deviceParamsFor({ engine: 'cpu' }, undefined), false);
  const cards = deviceParamsFor({ engine: 'tt' }, { members: [{ label: '0', env: {} }, { label: '1', env: {} }], minReady: 1 });
  assert.equal('threads_per_sidecar' in cards, false);
  assert.deepEqual(cards.devices, ['0', '1']);
});
