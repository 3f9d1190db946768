// rfdetr serve's new flag parsers: --memory-limit sizes and --allow-url-host HOST[:PORT], each malformed value a
// usage error naming what was expected; the --video-* flags that bound each other.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkVideoFlags, parseMemoryLimit } from '../../cli/commands/serve.ts';
import { runInProcess } from './helpers.ts';
import { parseAllowedHost } from '../../src/image/allowed-host.ts';

test('--memory-limit: bytes or K/M/G (powers of 1024), at least 512M', () => {
  assert.equal(parseMemoryLimit('1G'), 1024 ** 3);
  assert.equal(parseMemoryLimit('768M'), 768 * 1024 ** 2);
  assert.equal(parseMemoryLimit('1.5g'), 1.5 * 1024 ** 3);
  assert.equal(parseMemoryLimit('536870912'), 512 * 1024 ** 2);
  assert.equal(parseMemoryLimit('2GiB'), 2 * 1024 ** 3);
  for (const bad of ['100M', 'lots', '-1G', '1T', '']) {
    assert.throws(() => parseMemoryLimit(bad), /expected a size of at least 512M \(bytes, or with K, M or G: 768M, 1G\) but received/, bad);
  }
});

test('--allow-url-host: HOST means ports 80/443, HOST:PORT that port, IPv6 in brackets', () => {
  assert.deepEqual(parseAllowedHost('Images.Example.com'), { host: 'images.example.com', port: null });
  assert.deepEqual(parseAllowedHost('127.0.0.1:8080'), { host: '127.0.0.1', port: 8080 });
  assert.deepEqual(parseAllowedHost('[::1]:9000'), { host: '::1', port: 9000 });
  assert.deepEqual(parseAllowedHost('::1'), { host: '::1', port: null });
  assert.throws(() => parseAllowedHost('http://x.com'), /expected HOST or HOST:PORT/);
  assert.throws(() => parseAllowedHost('x.com:0'), /expected a port from 1 to 65535/);
  assert.throws(() => parseAllowedHost('x.com/path'), /expected a host name or IP address/);
});

test('--video-disk-limit under 2 × --video-max-bytes, or --video-client-uploads over --video-max-uploads: a usage error (exit 2) before anything starts', async () => {
  const ok = { videoMaxBytes: 1000, videoDiskLimit: 2000, videoMaxUploads: 8, videoClientUploads: 8 };
  checkVideoFlags(ok);
  checkVideoFlags({ ...ok, videoDiskLimit: undefined });
  assert.throws(() => checkVideoFlags({ ...ok, videoDiskLimit: 1999 }), /--video-disk-limit 1999: expected at least 2 × --video-max-bytes \(2000\)/);
  assert.throws(() => checkVideoFlags({ ...ok, videoClientUploads: 9 }), /--video-client-uploads 9: expected at most --video-max-uploads \(8\)/);
  const r = await runInProcess(['serve', '--video-max-bytes', '1000', '--video-disk-limit', '1500']);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /--video-disk-limit 1500: expected at least 2 × --video-max-bytes \(2000\)/);
});

test('several models: conflicting or impossible model flags are usage errors (exit 2) before any sidecar starts', async () => {
  const cases: Array<[string[], RegExp]> = [
    [['--weights', 'a=/x', '--models', '/m.json'], /--weights and --models both name the models: use one/],
    [['--weights', 'a=/x', '--weights', 'a=/y'], /--weights: two models have the id "a"/],
    [['--weights', 'a=/x', '--weights', 'b=/y', '--min-ready', '3'], /--min-ready 3: expected at most 2, the number of models/],
    [['--weights', 'a=/x', '--weights', 'b=/y', '--sidecar-socket', '/tmp/s.sock'], /--sidecar-socket connects to one sidecar, which serves one model/],
    [['--weights', 'a=/x', '--weights', 'b=/y', '--workers', '2'], /--devices and --workers run one model on several sidecars/],
    [['--models', '/nonexistent/models.json'], /--models \/nonexistent\/models\.json: cannot read it \(ENOENT\)/],
  ];
  for (const [args, want] of cases) {
    const r = await runInProcess(['serve', ...args]);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, want, args.join(' '));
  }
});

test('serve with several models exits 1 when every model failed to start, naming each id and why', async () => {
  const r = await runInProcess(['serve', '--host', '127.0.0.1', '--port', '0', '--weights', 'a=/nowhere/a', '--weights', 'b=/nowhere/b']);
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /rfdetr serve: every model failed and the server stopped: a: --weights names \/nowhere\/a, which is not a directory\. .*; b: --weights names \/nowhere\/b, which is not a directory\./);
});
