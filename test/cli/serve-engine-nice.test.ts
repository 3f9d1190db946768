// `rfdetr serve --engine-nice N` / `rfdetr-sidecar --nice N`: where the host permits raising a priority (root
// or CAP_SYS_NICE), every thread of the spawned sidecar runs at nice N, and /info's sidecar.nice says so;
// without CAP_SYS_NICE (setpriv drops it) the sidecar says "not applied", why, and serves at the nice it was
// started with; with RLIMIT_NICE allowing it (prlimit) it is applied without the capability. The sidecar shares
// its parent's session, so its parent's CPU autogroup, and its nice values order its threads against the
// parent's (it leads no session, so it leaves the autogroup alone). Read from /proc/PID/task/*/stat,
// /proc/PID/stat and /proc/PID/autogroup, the kernel's own record.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import { spawnSync } from 'node:child_process';
import { sidecarBinary } from '../../src/config/paths.ts';
import { createBackend, silentLogger } from '../../src/sidecar/index.ts';
import { DEFAULT_ENGINE_NICE, type EnginePriority } from '../../src/sidecar/backend.ts';
import { skipOrFail } from '../helpers/skip.ts';
import { synthWeights } from '../helpers/synth-weights.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { startServe } from '../helpers/serve-child.ts';
import { autogroupOn, sidecarChildOf, threadsOf } from '../helpers/proc.ts';

/** The nice values of every thread of `pid`. */
const nicesOf = (pid: number): number[] => threadsOf(pid).map((th) => th.nice);

/** Capability `bit` in this process's effective set (/proc/self/status CapEff). */
function hasCapability(bit: number): boolean {
  const line = fs.readFileSync('/proc/self/status', 'utf8').split('\n').find((l) => l.startsWith('CapEff:'));
  return line !== undefined && (BigInt(`0x${line.split(/\s+/)[1]}`) & (1n << BigInt(bit))) !== 0n;
}

/** CAP_SYS_NICE (bit 23): raising a priority is permitted. */
const maySetNice = () => hasCapability(23);

/** A process's process group and session (/proc/PID/stat: pid (comm) state ppid pgrp session ...). */
function groupOf(pid: number): { pgrp: number; session: number } {
  const st = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
  return { pgrp: Number(f[2]), session: Number(f[3]) };
}

/** What the sidecar's priority attempt says of the autogroup when it shares its parent's session. */
const sharedAutogroup = () => (autogroupOn() ? 'not a session leader' : 'off');

function needsLinux(t: TestContext): boolean {
  if (process.platform === 'linux') return true;
  skipOrFail(t, 'nice values and autogroups are read from Linux\'s /proc; run on Linux');
  return false;
}

test('the spawned sidecar runs in its parent\'s session (one CPU autogroup: nice values order their threads) and in a process group of its own (a terminal\'s Ctrl-C reaches only the parent)', { timeout: 300_000 }, async (t) => {
  if (!needsLinux(t)) return;
  assert.ok(fs.existsSync(sidecarBinary()), `${sidecarBinary()} is not built; run npm run build:sidecar`);
  const weights = await synthWeights();
  const b = createBackend({ engine: 'cpu', weightsDir: weights, threads: 1, logger: silentLogger });
  t.after(() => b.close());
  await b.ready();
  const sidecar = await waitFor('the sidecar among this process\'s children', () => sidecarChildOf(process.pid));
  const mine = groupOf(process.pid);
  const its = groupOf(sidecar);
  assert.equal(its.session, mine.session, 'the sidecar is in this process\'s session (not setsid: a session of its own is an autogroup of its own)');
  assert.equal(its.pgrp, sidecar, 'the sidecar leads a process group of its own');
  assert.notEqual(its.pgrp, mine.pgrp, 'not this process\'s group, where a terminal\'s SIGINT goes');
  if (autogroupOn()) assert.equal(fs.readFileSync(`/proc/${sidecar}/autogroup`, 'utf8'), fs.readFileSync(`/proc/${process.pid}/autogroup`, 'utf8'), 'one autogroup');
});

test(`serve (default --engine-nice ${DEFAULT_ENGINE_NICE}), permitted: every sidecar thread at ${DEFAULT_ENGINE_NICE} in the server's autogroup, /info says applied`, { timeout: 300_000 }, async (t) => {
  if (!needsLinux(t)) return;
  if (!maySetNice()) return skipOrFail(t, 'this test process lacks CAP_SYS_NICE, so a raised priority cannot be permitted here; run it as root (the not-permitted case is the next test)');
  assert.ok(fs.existsSync(sidecarBinary()), `${sidecarBinary()} is not built; run npm run build:sidecar`);
  const weights = await synthWeights();
  const { child, base } = await startServe(t, ['--weights', weights, '--engine', 'cpu', '--threads', '2', '--log-level', 'warn']);

  const info = (await (await fetch(`${base}/info`)).json()) as { serving: { engine_nice: unknown }; sidecar: { nice: EnginePriority } };
  assert.equal(info.serving.engine_nice, DEFAULT_ENGINE_NICE);
  assert.deepEqual(info.sidecar.nice, { requested: DEFAULT_ENGINE_NICE, nice: DEFAULT_ENGINE_NICE, applied: true, autogroup: sharedAutogroup() });
  const sidecar = sidecarChildOf(child.pid!);
  assert.ok(sidecar !== undefined, 'the server has an rfdetr-sidecar child');
  const nices = nicesOf(sidecar);
  assert.ok(nices.length >= 2, `the sidecar runs its forward threads: ${JSON.stringify(nices)}`);
  assert.deepEqual(nices.filter((n) => n !== DEFAULT_ENGINE_NICE), [], `every sidecar thread at ${DEFAULT_ENGINE_NICE}: ${JSON.stringify(nices)}`);
  // The autogroup is the server's, left at its nice: the sidecar's raised threads outrank the server's within it.
  if (autogroupOn()) assert.equal(fs.readFileSync(`/proc/${sidecar}/autogroup`, 'utf8'), fs.readFileSync(`/proc/${child.pid!}/autogroup`, 'utf8'));
  // The server itself is not raised: only the engine is.
  assert.deepEqual(nicesOf(child.pid!).filter((n) => n < 0), [], 'no server thread below nice 0');
});

test('sidecar --nice -5 without CAP_SYS_NICE (setpriv): "not applied", why, and it serves at the nice it inherited', { timeout: 300_000 }, async (t) => {
  if (!needsLinux(t)) return;
  if (spawnSync('setpriv', ['--version']).status !== 0) return skipOrFail(t, 'setpriv (util-linux) is not installed: it drops CAP_SYS_NICE for this case; install util-linux');
  if (process.getuid?.() !== 0 && Number(spawnSync('sh', ['-c', 'ulimit -e']).stdout.toString().trim()) > 20) {
    return skipOrFail(t, 'RLIMIT_NICE (ulimit -e) above 20 permits raising a priority without CAP_SYS_NICE; run with ulimit -e 0');
  }
  assert.ok(fs.existsSync(sidecarBinary()), `${sidecarBinary()} is not built; run npm run build:sidecar`);
  const weights = await synthWeights();
  const lines: string[] = [];
  const logger = { ...silentLogger, warn: (m: string) => void lines.push(m) };
  const b = createBackend({
    engine: 'cpu', weightsDir: weights, threads: 2, nice: -5, logger,
    command: { file: 'setpriv', args: ['--inh-caps=-all', '--bounding-set=-sys_nice', sidecarBinary()] },
  });
  t.after(() => b.close());
  await b.ready();
  const p = b.info?.enginePriority;
  assert.ok(p, `backend.info carries the READY line's nice: ${JSON.stringify(b.info)}`);
  assert.equal(p.requested, -5);
  assert.equal(p.applied, false);
  // The sidecar keeps the nice value it inherited: this process's (0 on a plain runner; `nice -n 19 npm test` runs it at 19).
  const inherited = os.getPriority();
  assert.equal(p.nice, inherited);
  assert.match(p.note ?? '', /Permission denied: raising a priority needs CAP_SYS_NICE/);
  // In this process's session: the autogroup, this process's too, is not touched.
  assert.equal(p.autogroup, sharedAutogroup());
  assert.ok(lines.some((l) => new RegExp(`--nice -5 was not applied \\(it runs at nice ${inherited}`).test(l)), `one warning says so: ${JSON.stringify(lines)}`);
  const sidecar = await waitFor('the setpriv\'d sidecar among this process\'s children', () => sidecarChildOf(process.pid));
  assert.deepEqual(nicesOf(sidecar).filter((n) => n !== inherited), [], `every thread kept nice ${inherited}`);
  const r = await b.infer({ image: { width: 2, height: 2, data: new Uint8Array(12) } });
  assert.ok(r.outputs.logits!.length > 0, 'it serves');
});

test('sidecar --nice -5 without CAP_SYS_NICE but RLIMIT_NICE 25 (prlimit + setpriv): applied, every thread at -5', { timeout: 300_000 }, async (t) => {
  if (!needsLinux(t)) return;
  for (const tool of ['setpriv', 'prlimit']) {
    if (spawnSync(tool, ['--version']).status !== 0) return skipOrFail(t, `${tool} (util-linux) is not installed: this case needs it to drop CAP_SYS_NICE and set RLIMIT_NICE; install util-linux`);
  }
  // Raising RLIMIT_NICE's hard limit needs CAP_SYS_RESOURCE (bit 24); without it the hard limit must allow 25 already.
  const hard = /^Max nice priority\s+\S+\s+(\S+)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'))?.[1] ?? '0';
  if (!hasCapability(24) && hard !== 'unlimited' && Number(hard) < 25) {
    return skipOrFail(t, `RLIMIT_NICE's hard limit is ${hard} and this process lacks CAP_SYS_RESOURCE to raise it to 25 (a container's default); run where it may (a VM, or docker --cap-add SYS_RESOURCE)`);
  }
  assert.ok(fs.existsSync(sidecarBinary()), `${sidecarBinary()} is not built; run npm run build:sidecar`);
  const weights = await synthWeights();
  const b = createBackend({
    engine: 'cpu', weightsDir: weights, threads: 2, nice: -5, logger: silentLogger,
    // RLIMIT_NICE 25 permits nice down to 20 - 25 = -5 without the capability (setrlimit(2)).
    command: { file: 'prlimit', args: ['--nice=25:25', '--', 'setpriv', '--inh-caps=-all', '--bounding-set=-sys_nice', sidecarBinary()] },
  });
  t.after(() => b.close());
  await b.ready();
  const p = b.info?.enginePriority;
  assert.deepEqual(p, { requested: -5, nice: -5, applied: true, autogroup: sharedAutogroup() });
  const sidecar = await waitFor('the prlimit\'d sidecar among this process\'s children', () => sidecarChildOf(process.pid));
  const nices = nicesOf(sidecar);
  assert.deepEqual(nices.filter((n) => n !== -5), [], `every thread at -5: ${JSON.stringify(nices)}`);
  const r = await b.infer({ image: { width: 2, height: 2, data: new Uint8Array(12) } });
  assert.ok(r.outputs.logits!.length > 0, 'it serves');
});
