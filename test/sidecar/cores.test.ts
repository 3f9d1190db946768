// --workers N at the default --threads 0: the physical cores are split among the workers (each its --threads),
// not given whole to every one of them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import os from 'node:os';
import { parseCpuList, physicalCoreCount, splitCores } from '../../src/sidecar/cores.ts';
import { planMembers } from '../../src/sidecar/devices.ts';

test('splitCores: the cores over the workers, the remainder to the first ones, never below 1', () => {
  assert.deepEqual(splitCores(8, 3), [3, 3, 2]);
  assert.deepEqual(splitCores(8, 2), [4, 4]);
  assert.deepEqual(splitCores(2, 3), [1, 1, 1]);
  assert.deepEqual(splitCores(1, 1), [1]);
});

test('planMembers --workers: --threads 0 or absent splits the cores; --threads N or RFDETR_THREADS=N is per worker', () => {
  const threadsOf = (r: Partial<Omit<Parameters<typeof planMembers>[0], 'hostCores'>>) =>
    planMembers({ engine: 'cpu', hostCores: true, workers: 3, env: {}, cores: () => 8, ...r }).map((m) => [m.label, m.threads]);
  assert.deepEqual(threadsOf({}), [['worker-0', 3], ['worker-1', 3], ['worker-2', 2]]);
  assert.deepEqual(threadsOf({ threads: 0 }), [['worker-0', 3], ['worker-1', 3], ['worker-2', 2]]);
  assert.deepEqual(threadsOf({ env: { RFDETR_THREADS: '0' } }), [['worker-0', 3], ['worker-1', 3], ['worker-2', 2]]);
  assert.deepEqual(threadsOf({ threads: 2 }), [['worker-0', 2], ['worker-1', 2], ['worker-2', 2]]);
  assert.deepEqual(threadsOf({ env: { RFDETR_THREADS: '4' } }), [['worker-0', 4], ['worker-1', 4], ['worker-2', 4]]);
  // One sidecar (no --workers) keeps the command's --threads: the sidecar resolves 0 itself.
  assert.equal(planMembers({ engine: 'cpu', hostCores: true, env: {}, cores: () => 8 })[0]!.threads, undefined);
});

test('physicalCoreCount: a positive count no larger than the CPUs this process may use', () => {
  const n = physicalCoreCount();
  assert.ok(Number.isInteger(n) && n >= 1 && n <= os.availableParallelism(), `${n} physical cores, ${os.availableParallelism()} CPUs`);
  assert.deepEqual(parseCpuList('0-3,8,10-11\n'), [0, 1, 2, 3, 8, 10, 11]);
});
