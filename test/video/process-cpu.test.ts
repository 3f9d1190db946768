// A child's CPU time from /proc/<pid>/stat: the fields after the command name (which may hold spaces and
// parentheses), in USER_HZ ticks; this process's own figure agrees with process.cpuUsage() to a tick or two.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { processCpuMs, statCpuMs } from '../../src/video/process-cpu.ts';

test('statCpuMs: utime + stime after a command name with spaces and ")" in it', () => {
  // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
  const stat = '4242 (ff (mpeg) x) S 1 4242 4242 0 -1 4194304 100 0 0 0 37 5 0 0 20 0 3 0 123 456 789';
  assert.equal(statCpuMs(stat), (37 + 5) * 10);
  assert.equal(statCpuMs('garbage'), null);
});

test('processCpuMs: this process, against process.cpuUsage()', { skip: process.platform !== 'linux' && 'reads /proc: Linux only' }, () => {
  let x = 0;
  for (let i = 0; i < 3e7; i++) x += Math.sqrt(i); // some CPU to count
  assert.ok(x > 0);
  const u = process.cpuUsage();
  const ms = processCpuMs(process.pid);
  assert.notEqual(ms, null);
  // /proc counts whole ticks of 10 ms for the main and every other thread (libuv's, V8's): within 50 ms.
  assert.ok(Math.abs(ms! - (u.user + u.system) / 1000) <= 50, `/proc says ${ms} ms, cpuUsage ${(u.user + u.system) / 1000} ms`);
  assert.equal(processCpuMs(undefined), null);
});
