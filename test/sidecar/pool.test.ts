// The sidecar pool against the real test sidecar ("test-sleep", a card stand-in whose load fails unless its
// card exists under RFDETR_TT_DEVICE_DIR): each child's environment names its own card, a missing card is
// reported by device and does not stop the others, kill -9 of one sidecar under load fails at most its
// in-flight requests while /ready stays 200, and it comes back. Also: --devices / --workers planning, and the
// READY channel surviving an engine that logs to stdout.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, constants, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { packageRoot } from '../../src/config/paths.ts';
import { createServer } from '../../src/http/server.ts';
import { createJsonLogger } from '../../src/http/log.ts';
import { createPool, planMembers, parseDeviceList } from '../../src/sidecar/index.ts';
import { RfdetrError } from '../../src/errors.ts';
import { goldens } from '../http/helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';

const testBinary = path.join(packageRoot, 'sidecar', 'build', 'rfdetr-sidecar-test');

function needBinary(t: { skip: (m: string) => void }): boolean {
  assert.ok(existsSync(testBinary), `${testBinary} is not built: run npm install`);
  return true;
}

const until = (what: string, check: () => boolean | Promise<boolean>) => waitFor(what, check, 30_000);

/** A card directory holding `cards` (one empty file per card index), and a pool over `devices` on it. */
function cardPool(t: { after: (fn: () => unknown) => void }, cards: number[], devices: number[],
  extra: { forwardMs?: number; minReady?: number; ping?: { pingIntervalMs: number; pingTimeoutMs: number; maxMissedPings: number }; gate?: { device: string; fifo: string } } = {}) {
  const root = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-pool-'));
  const dev = path.join(root, 'dev');
  const weights = path.join(root, 'weights');
  for (const d of [dev, weights]) mkdirSync(d, { recursive: true });
  for (const c of cards) writeFileSync(path.join(dev, String(c)), '');
  const env = { TT_METAL_CACHE: path.join(root, 'tt-cache'), HOME: root };
  const members = planMembers({ engine: 'test-sleep', hostCores: false, devices, env });
  const pool = createPool({
    members: members.map((m) => ({
      label: m.label, engine: 'test-sleep', weightsDir: weights, command: { file: testBinary },
      env: { ...m.env, RFDETR_TT_DEVICE_DIR: dev, RFDETR_TEST_FORWARD_MS: String(extra.forwardMs ?? 20), ...(extra.gate?.device === m.label ? { RFDETR_TEST_GATE: extra.gate.fifo } : {}) },
      restart: { initialDelayMs: 20 }, ...extra.ping,
    })),
    minReady: extra.minReady,
  });
  t.after(() => {
    pool.destroy();
    rmSync(root, { recursive: true, force: true });
  });
  return { pool, root };
}

function environOf(pid: number): Record<string, string> {
  return Object.fromEntries(readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean).map((kv) => {
    const i = kv.indexOf('=');
    return [kv.slice(0, i), kv.slice(i + 1)];
  }));
}

test('devices: --devices and --workers plans (labels, per-card environment, usage errors)', () => {
  assert.deepEqual(parseDeviceList('0, 2,3'), [0, 2, 3]);
  assert.equal(parseDeviceList('all'), 'all');
  assert.throws(() => parseDeviceList('0,x'), /expected card indices separated by commas .* but received "0,x"/);
  assert.throws(() => parseDeviceList('1,1'), /card 1 is listed twice/);
  const env = { TT_METAL_CACHE: '/var/cache/rfdetr/tt-metal' };
  const m = planMembers({ engine: 'tt', hostCores: false, devices: [2, 5], env });
  assert.deepEqual(m, [
    { label: '2', env: { TT_VISIBLE_DEVICES: '2', TT_METAL_VISIBLE_DEVICES: '2', TT_DEVICE_ID: '0', TT_METAL_CACHE: '/var/cache/rfdetr/tt-metal/device-2' } },
    { label: '5', env: { TT_VISIBLE_DEVICES: '5', TT_METAL_VISIBLE_DEVICES: '5', TT_DEVICE_ID: '0', TT_METAL_CACHE: '/var/cache/rfdetr/tt-metal/device-5' } },
  ]);
  assert.deepEqual(planMembers({ engine: 'cpu', hostCores: true, workers: 3, env }).map((x) => x.label), ['worker-0', 'worker-1', 'worker-2']);
  assert.throws(() => planMembers({ engine: 'cpu', hostCores: true, devices: [0], env }), (e: RfdetrError) => e.code === 'E_USAGE' && /use --workers/.test(e.message));
  assert.throws(() => planMembers({ engine: 'tt', hostCores: false, workers: 2, env }), (e: RfdetrError) => e.code === 'E_USAGE' && /use --devices/.test(e.message));
  assert.throws(() => planMembers({ engine: 'tt', hostCores: false, devices: [0], workers: 2, env }), /cannot be combined/);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-cards-'));
  try {
    assert.throws(() => planMembers({ engine: 'tt', hostCores: false, devices: 'all', env: { RFDETR_TT_DEVICE_DIR: dir } }), /--devices all: no cards in/);
    for (const c of ['3', '0', '10', 'not-a-card']) writeFileSync(path.join(dir, c), '');
    assert.deepEqual(planMembers({ engine: 'tt', hostCores: false, devices: 'all', env: { RFDETR_TT_DEVICE_DIR: dir } }).map((x) => x.label), ['0', '3', '10']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('pool: each sidecar\'s environment names its own card; a missing card is reported by device, the others serve', async (t) => {
  if (!needBinary(t)) return;
  const { pool, root } = cardPool(t, [0, 1, 3], [0, 1, 2, 3]);
  await pool.ready(60_000);
  await until('device 2 to fail', () => pool.member('2')!.state === 'failed');
  await until('devices 0, 1, 3 to be ready', () => ['0', '1', '3'].every((d) => pool.member(d)!.state === 'ready'));
  assert.equal(pool.state, 'ready');
  for (const d of ['0', '1', '3']) {
    const env = environOf(pool.member(d)!.pid!);
    assert.equal(env.TT_VISIBLE_DEVICES, d);
    assert.equal(env.TT_METAL_VISIBLE_DEVICES, d);
    assert.equal(env.TT_DEVICE_ID, '0');
    assert.equal(env.TT_METAL_CACHE, path.join(root, 'tt-cache', `device-${d}`));
    assert.match(pool.member(d)!.info!.device, new RegExp(`card ${d}\\)`));
  }
  const two = pool.devices().find((x) => x.device === '2')!;
  assert.equal(two.removed, true);
  assert.equal(two.state, 'failed');
  assert.match(two.lastFailure!, /could not open Tenstorrent device 2: .*\/dev\/2 does not exist/);
  assert.equal(pool.removedCount, 1);
  // Requests go only to the ready cards.
  const px = new Float32Array(3 * 560 * 560);
  const served = await Promise.all(Array.from({ length: 6 }, () => pool.infer({ pixelValues: px })));
  assert.equal(served.length, 6);
  assert.equal(pool.devices().find((x) => x.device === '2')!.forwards, 0);
  assert.ok(pool.devices().filter((x) => x.forwards > 0).length >= 2, JSON.stringify(pool.devices()));
});

test('pool over HTTP: kill -9 of one sidecar under 16 clients — /ready stays 200, at most its in-flight requests fail, it comes back', async (t) => {
  if (!needBinary(t)) return;
  // Device 1's forwards wait at a FIFO (the test engine's RFDETR_TEST_GATE) until the test writes a byte per
  // forward, so it surely has requests in flight when it is killed (with free-running 20 ms forwards its last
  // reply could beat the kill, and the case was flaky); the restarted process reads the same FIFO.
  const gateDir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-gate-'));
  const fifo = path.join(gateDir, 'gate');
  execFileSync('mkfifo', [fifo]);
  const gate = openSync(fifo, constants.O_RDWR);
  t.after(() => (closeSync(gate), rmSync(gateDir, { recursive: true, force: true })));
  const { pool } = cardPool(t, [0, 1, 2, 3], [0, 1, 2, 3], { forwardMs: 20, gate: { device: '1', fifo } });
  writeSync(gate, Buffer.alloc(2, 1)); // its two warm-up forwards (sidecar-main.cpp, warm_up)
  const srv = createServer({ backend: pool, engineConcurrency: 8, queueSize: 64, logger: createJsonLogger('error', () => {}), defaultMetrics: false });
  const { url } = await srv.listen('127.0.0.1', 0);
  t.after(() => srv.drain(5_000));
  await pool.ready(60_000);
  await until('all four ready', () => pool.devices().every((d) => d.state === 'ready'));
  const body = JSON.stringify({ image: goldens()[0]!.png.toString('base64') });
  const statuses: number[] = [];
  const readyStatuses: number[] = [];
  let stop = false;
  const client = async () => {
    while (!stop) {
      const r = await fetch(`${url}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      await r.arrayBuffer();
      statuses.push(r.status);
    }
  };
  const prober = async () => {
    while (!stop) readyStatuses.push((await fetch(`${url}/ready`)).status);
  };
  const clients = [...Array.from({ length: 16 }, client), prober()];
  await until('some load', () => statuses.length >= 20);
  const victim = pool.member('1')!;
  const pid = victim.pid!;
  await until('requests in flight on device 1', () => victim.inFlight > 0);
  // Its in-flight requests when the supervisor saw the death (requests routed between the kill and that
  // moment were in flight on it too).
  let inFlightAtDeath = -1;
  const off = victim.onStateChange((s) => {
    if (s !== 'ready' && inFlightAtDeath < 0) inFlightAtDeath = victim.inFlight;
  });
  const okBefore = statuses.filter((s) => s === 200).length;
  process.kill(pid, 'SIGKILL');
  // The gate opens for the new process (its warm-up and every forward until the test ends; a FIFO holds 64 KiB).
  writeSync(gate, Buffer.alloc(60_000, 1));
  await until('device 1 back with a new process', () => victim.state === 'ready' && victim.pid !== pid);
  const atReturn = statuses.length;
  await until('more load after the return', () => statuses.length >= atReturn + 20);
  stop = true;
  await Promise.all(clients);
  off();
  const failed = statuses.filter((s) => s !== 200);
  assert.ok(inFlightAtDeath >= 1, 'device 1 had requests in flight when it died');
  assert.ok(failed.length <= inFlightAtDeath, `${failed.length} requests failed (${failed.join(',')}), device 1 had ${inFlightAtDeath} in flight`);
  assert.ok(failed.every((s) => s === 500 || s === 503), failed.join(','));
  assert.deepEqual([...new Set(readyStatuses)], [200], '/ready stayed 200 throughout');
  assert.ok(okBefore > 0 && statuses.filter((s) => s === 200).length > okBefore);
  assert.equal(victim.restarts, 1);
  assert.ok(pool.devices().find((d) => d.device === '1')!.forwards > 0);
  const m = await (await fetch(`${url}/metrics`)).text();
  assert.match(m, /^rfdetr_device_state\{device="1",state="ready"\} 1$/m);
});

test('the READY channel: an engine that logs to stdout while loading does not disturb READY (its line goes to stderr)', async (t) => {
  if (!needBinary(t)) return;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rfdetr-stdout-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const child = execa(testBinary, ['--engine', 'test-echo', '--weights', dir, '--socket', path.join(dir, 's.sock')], {
    env: { RFDETR_TEST_ECHO_STDOUT: '1' }, reject: false, buffer: false,
  });
  let out = '';
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  await new Promise<void>((resolve) => child.stdout!.on('data', (d: Buffer) => {
    out += d.toString();
    if (out.includes('\n')) resolve();
  }));
  child.kill('SIGTERM');
  await child;
  assert.match(out.split('\n')[0]!, /^READY \{/, `stdout's first line must be READY: ${JSON.stringify(out)}`);
  assert.match(err, /a log line written to stdout while loading/);
});

test('pool over HTTP: a frozen card (SIGSTOP) is unresponsive in /health at its first missed ping; with --min-ready-devices 2 of 2 /ready turns 503, and 200 after SIGCONT', async (t) => {
  if (!needBinary(t)) return;
  const { pool } = cardPool(t, [0, 1], [0, 1], { minReady: 2, ping: { pingIntervalMs: 50, pingTimeoutMs: 100, maxMissedPings: 1000 } });
  const srv = createServer({ backend: pool, engineConcurrency: 4, logger: createJsonLogger('error', () => {}), defaultMetrics: false });
  const { url } = await srv.listen('127.0.0.1', 0);
  t.after(() => srv.drain(5_000));
  await pool.ready(60_000);
  const ready = async () => (await fetch(`${url}/ready`)).status;
  const stateOf = async (d: string) => ((await (await fetch(`${url}/health`)).json()) as { devices: { device: string; state: string }[] }).devices.find((x) => x.device === d)!.state;
  assert.equal(await ready(), 200);
  const pid = pool.member('1')!.pid!;
  process.kill(pid, 'SIGSTOP');
  try {
    await until('/ready 503', async () => (await ready()) === 503);
    assert.equal(await stateOf('1'), 'unresponsive');
    assert.equal(await stateOf('0'), 'ready');
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  await until('/ready 200 again', async () => (await ready()) === 200);
  assert.equal(await stateOf('1'), 'ready');
  assert.equal(pool.member('1')!.pid, pid, 'not restarted');
});
