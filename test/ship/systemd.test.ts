// deploy/systemd: systemd-analyze verify accepts the units (no warnings), systemd-analyze security rates
// them, and the settings the other pieces rely on (Type=notify, watchdog, restart, socket directory, device
// access) are present.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { packageRoot } from '../../src/config/paths.ts';
import { DEFAULT_PORT, readText } from './ship-helpers.ts';
import { skipOrFail } from '../helpers/skip.ts';

const UNITS = ['rfdetr-sidecar.service', 'rfdetr-sidecar.socket', 'rfdetr.service'];
const ANALYZE = '/usr/bin/systemd-analyze';
const SOCKET = '/run/rfdetr/sidecar.sock';

type Unit = Map<string, Map<string, string[]>>;
function parseUnit(text: string): Unit {
  const unit: Unit = new Map();
  let section: Map<string, string[]> | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#') || line.startsWith(';')) continue;
    const sec = /^\[(\w+)\]$/.exec(line);
    if (sec) { section = new Map(); unit.set(sec[1]!, section); continue; }
    const kv = /^([\w]+)=(.*)$/.exec(line);
    assert.ok(kv && section, `cannot parse unit line '${line}'`);
    section.set(kv[1]!, [...(section.get(kv[1]!) ?? []), kv[2]!]);
  }
  return unit;
}
const unit = (name: string) => parseUnit(readText(`deploy/systemd/${name}`));
const get = (u: Unit, sec: string, key: string) => u.get(sec)?.get(key)?.at(-1);

let root = '';
before(() => {
  // A root holding the units, the unit library (for sysinit.target and friends) and stand-in executables at
  // the /opt/rfdetr paths ExecStart names, so verify checks them the way it would on an installed host.
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-systemd-'));
  fs.mkdirSync(path.join(root, 'etc/systemd/system'), { recursive: true });
  fs.mkdirSync(path.join(root, 'usr/lib/systemd'), { recursive: true });
  if (fs.existsSync('/usr/lib/systemd/system')) fs.cpSync('/usr/lib/systemd/system', path.join(root, 'usr/lib/systemd/system'), { recursive: true, verbatimSymlinks: true });
  for (const u of UNITS) fs.copyFileSync(path.join(packageRoot, 'deploy/systemd', u), path.join(root, 'etc/systemd/system', u));
  for (const exe of ['opt/rfdetr/sidecar/build/rfdetr-sidecar', 'opt/rfdetr/bin/rfdetr']) {
    fs.mkdirSync(path.dirname(path.join(root, exe)), { recursive: true });
    fs.writeFileSync(path.join(root, exe), '#!/bin/sh\n', { mode: 0o755 });
  }
});
after(() => { if (root) fs.rmSync(root, { recursive: true, force: true }); });

test('systemd: systemd-analyze verify accepts every unit without a warning', (t) => {
  if (!fs.existsSync(ANALYZE)) return skipOrFail(t, `${ANALYZE} is absent (Debian package systemd); install it to verify the units`);
  const files = UNITS.map((u) => path.join(root, 'etc/systemd/system', u));
  const r = spawnSync(ANALYZE, ['verify', '--man=no', `--root=${root}`, ...files], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr.trim(), '', 'verify prints nothing for clean units (unknown keys and bad values are only warnings)');
});

test('systemd: verify fails on what it should (an ExecStart that does not exist, a misspelt key)', (t) => {
  if (!fs.existsSync(ANALYZE)) return skipOrFail(t, `${ANALYZE} is absent`);
  const bad = path.join(root, 'etc/systemd/system/rfdetr-bad.service');
  fs.writeFileSync(bad, readText('deploy/systemd/rfdetr.service').replace('/opt/rfdetr/bin/rfdetr', '/opt/rfdetr/bin/nope').replace('Restart=', 'Restartt='));
  const r = spawnSync(ANALYZE, ['verify', '--man=no', `--root=${root}`, bad], { encoding: 'utf8' });
  fs.rmSync(bad);
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /Unknown key 'Restartt'/);
  assert.match(r.stderr, /\/opt\/rfdetr\/bin\/nope is not executable/);
});

test('systemd: the services are hardened (systemd-analyze security exposure ≤ 4.0)', (t) => {
  if (!fs.existsSync(ANALYZE)) return skipOrFail(t, `${ANALYZE} is absent`);
  for (const u of ['rfdetr-sidecar.service', 'rfdetr.service']) {
    const r = spawnSync(ANALYZE, ['security', '--offline=yes', `--root=${root}`, '--threshold=40', '--no-pager', path.join(root, 'etc/systemd/system', u)], { encoding: 'utf8' });
    assert.equal(r.status, 0, `${u}: ${r.stdout.split('\n').filter((l) => l.includes('Overall')).join('') || r.stderr}`);
  }
});

test('systemd: rfdetr-sidecar.service is Type=notify with watchdog, restart, socket dir and device-only-tenstorrent', () => {
  const u = unit('rfdetr-sidecar.service');
  const s = (k: string) => get(u, 'Service', k);
  assert.equal(s('Type'), 'notify');
  assert.equal(s('NotifyAccess'), 'main');
  assert.equal(s('Restart'), 'on-failure');
  assert.match(s('WatchdogSec') ?? '', /^\d+s$/);
  assert.equal(s('RuntimeDirectory'), 'rfdetr');
  assert.equal(s('RuntimeDirectoryMode'), '0700');
  assert.equal(s('ExecStart'), `/opt/rfdetr/sidecar/build/rfdetr-sidecar --socket ${SOCKET}`);
  assert.equal(s('User'), 'rfdetr');
  for (const [k, v] of [['NoNewPrivileges', 'yes'], ['ProtectSystem', 'strict'], ['PrivateTmp', 'yes'], ['DevicePolicy', 'closed']]) assert.equal(s(k!), v, k);
  assert.deepEqual(u.get('Service')!.get('DeviceAllow'), ['char-tenstorrent rw'], 'the only device: the Tenstorrent character devices');
  assert.notEqual(s('PrivateDevices'), 'yes', 'PrivateDevices would hide /dev/tenstorrent');
  assert.match(s('TimeoutStartSec') ?? '', /^\d+min$/, 'start timeout long enough for a cold kernel compile');
  assert.ok((u.get('Service')!.get('Environment') ?? []).includes('RFDETR_ENGINE=tt'));
});

test('systemd: rfdetr.service is the HTTP server in external-socket mode after a READY sidecar, same user', () => {
  const u = unit('rfdetr.service');
  const sidecar = unit('rfdetr-sidecar.service');
  assert.equal(get(u, 'Unit', 'Requires'), 'rfdetr-sidecar.service');
  assert.match(get(u, 'Unit', 'After') ?? '', /(^| )rfdetr-sidecar\.service( |$)/);
  const exec = (get(u, 'Service', 'ExecStart') ?? '').split(' ');
  assert.deepEqual(exec.slice(0, 2), ['/opt/rfdetr/bin/rfdetr', 'serve']);
  assert.equal(exec[exec.indexOf('--sidecar-socket') + 1], SOCKET);
  assert.equal(exec[exec.indexOf('--port') + 1], String(DEFAULT_PORT));
  assert.equal(get(u, 'Service', 'User'), get(sidecar, 'Service', 'User'), 'the 0600 socket needs the same user');
  assert.equal(get(u, 'Service', 'Group'), get(sidecar, 'Service', 'Group'));
  assert.equal(get(u, 'Service', 'Restart'), 'on-failure');
  for (const [k, v] of [['NoNewPrivileges', 'yes'], ['ProtectSystem', 'strict'], ['PrivateTmp', 'yes'], ['PrivateDevices', 'yes']]) assert.equal(get(u, 'Service', k!), v, k);
});

test('systemd: the optional socket unit listens where the sidecar would, 0600, owned by rfdetr', () => {
  const u = unit('rfdetr-sidecar.socket');
  assert.equal(get(u, 'Socket', 'ListenStream'), SOCKET);
  assert.equal(get(u, 'Socket', 'SocketMode'), '0600');
  assert.equal(get(u, 'Socket', 'DirectoryMode'), '0700');
  assert.equal(get(u, 'Socket', 'SocketUser'), 'rfdetr');
  assert.equal(get(unit('rfdetr-sidecar.service'), 'Service', 'RuntimeDirectoryPreserve'), 'yes', 'a sidecar restart must not delete the activated socket');
  assert.match(readText('deploy/systemd/rfdetr.sysusers.conf'), /^u rfdetr - /m);
});
