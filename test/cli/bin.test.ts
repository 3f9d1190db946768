// The real `bin/rfdetr.js` as a subprocess: exit codes and messages, --version, detect --url against a
// /predict server, and smoke's PASS and FAIL paths. (The sidecar-backed runs are in cli-e2e.test.ts.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { caseImage, fixtureDetections, replayServer, runBin, runInProcess, tinyServer } from './helpers.ts';

test('bin: --help documents the exit codes (0); unknown flags and bad values exit 2 naming them; --version', async () => {
  const help = await runBin(['--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /Exit status:\n  0  success\n  1  runtime error.*\n  2  usage error/);
  for (const c of ['detect', 'serve', 'smoke', 'info', 'bench', 'verify', 'weights']) {
    assert.match(help.stdout, new RegExp(`\\n  ${c} `), `--help lists ${c}`);
  }
  const unknown = await runBin(['detect', '--frobnicate', caseImage('case-1')]);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /unknown option '--frobnicate'/);
  assert.equal(unknown.stdout, '');
  const thr = await runBin(['detect', '--threshold', 'high', caseImage('case-1')]);
  assert.equal(thr.code, 2);
  assert.match(thr.stderr, /--threshold <t>' argument 'high' is invalid. expected a number from 0 to 1/);
  const cmd = await runBin(['detekt']);
  assert.equal(cmd.code, 2);
  assert.match(cmd.stderr, /unknown command 'detekt'/);
  const v = await runBin(['--version']);
  assert.equal(v.code, 0);
  const pkg = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  assert.match(v.stdout, new RegExp(`^rfdetr-serve ${pkg.version.replace(/\./g, '\\.')}\nsidecar: .+\nprotocol: .+`));
});

test('bin: detect with a missing path exits 1 naming it, before any engine starts', async () => {
  const r = await runBin(['detect', '--json', 'no/such/image.png']);
  assert.equal(r.code, 1);
  assert.equal(r.stdout, '');
  assert.match(r.stderr, /no\/such\/image\.png: no such file or directory/);
  assert.match(r.stderr, /nothing was run/);
});

test('bin: detect --url gives the same JSON lines as in process; an undecodable image is named, exit 1', async () => {
  const server = await replayServer();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-url-'));
  try {
    const bad = path.join(tmp, 'garbage.jpg');
    fs.writeFileSync(bad, 'definitely not a jpeg');
    const args = ['detect', '--json', '--threshold', '0.4', '--classes', 'banana,airplane,bird', caseImage('case-1'), caseImage('case-2')];
    const remote = await runBin([...args, '--url', server.url]);
    assert.equal(remote.code, 0, remote.stderr);
    const local = await runInProcess(args);
    assert.equal(local.code, 0, local.stderr);
    const strip = (s: string) => s.trim().split('\n').map((l) => {
      const o = JSON.parse(l) as { timing_ms?: unknown };
      delete o.timing_ms;
      return o;
    });
    const r = strip(remote.stdout);
    assert.equal(r.length, 2);
    assert.deepEqual(r, strip(local.stdout), 'same response objects (timings aside)');
    assert.ok((r[0] as { num_detections: number }).num_detections > 0);
    assert.deepEqual(server.requests.filter((q) => q.startsWith('POST')).length, 2);
    const withBad = await runBin(['detect', '--json', '--url', server.url, caseImage('case-3'), bad]);
    assert.equal(withBad.code, 1);
    assert.equal(withBad.stdout.trim().split('\n').length, 1);
    assert.equal((JSON.parse(withBad.stdout) as { num_detections: number }).num_detections, fixtureDetections('case-3').detections['0.5']!.length);
    assert.match(withBad.stderr, /garbage\.jpg: POST http:\/\/127\.0\.0\.1:\d+\/predict answered 400: image could not be decoded/);
    const down = await runBin(['detect', '--json', '--url', 'http://127.0.0.1:9', caseImage('case-1')]);
    assert.equal(down.code, 1);
    assert.match(down.stderr, /POST http:\/\/127\.0\.0\.1:9\/predict failed: ECONNREFUSED; is the server running there/);
  } finally {
    await server.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('bin: smoke PASS against a /predict server: one line with n and the counts; --out writes the response', async () => {
  const server = await replayServer();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-smoke-'));
  try {
    const want = fixtureDetections('case-1').detections['0.5']!;
    const counts = new Map<string, number>();
    for (const d of want) counts.set(d.label_name, (counts.get(d.label_name) ?? 0) + 1);
    const out = path.join(tmp, 'resp.json');
    const r = await runBin(['smoke', '--url', server.url, '--out', out, '--expect', `banana:${counts.get('banana')},airplane:${counts.get('airplane')}`]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const line = r.stdout.trim();
    assert.equal(r.stdout.split('\n').length, 2, 'exactly one line');
    const keys = [...counts.keys()].sort();
    const countsText = `{${keys.map((k) => `"${k}": ${counts.get(k)}`).join(', ')}}`;
    assert.ok(line.startsWith(`PASS n=${want.length} counts=${countsText} top=${want[0]!.label_name}:${want[0]!.score.toFixed(3)}`), line);
    const saved = JSON.parse(fs.readFileSync(out, 'utf8')) as { num_detections: number };
    assert.equal(saved.num_detections, want.length);
    const wrong = await runBin(['smoke', '--url', server.url, '--expect', 'banana:99']);
    assert.equal(wrong.code, 1);
    assert.match(wrong.stdout, new RegExp(`^FAIL expected banana:99 \\(got ${counts.get('banana')}\\)`));
  } finally {
    await server.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});

test('bin: smoke FAIL paths: not ready (503 then timeout), malformed response, HTTP error, nobody listening; bad --expect is usage', async () => {
  let mode: 'starting' | 'malformed' | 'error' = 'starting';
  let readyChecks = 0;
  const server = await tinyServer((req, _body, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url === '/ready') {
      readyChecks++;
      res.statusCode = mode === 'starting' ? 503 : 200;
      res.end(JSON.stringify({ status: mode === 'starting' ? 'starting' : 'ready' }));
      return;
    }
    if (mode === 'error') {
      res.statusCode = 500;
      res.end(JSON.stringify({ detail: 'inference failed: RuntimeError: device hung', code: 'E_INFERENCE' }));
      return;
    }
    // box outside the 640x480 image, and num_detections disagreeing with the list
    res.end(JSON.stringify({ detections: [{ label: 'cat', label_id: 17, score: 0.9, box: [0, 0, 700, 10], box_cxcywh_norm: [0, 0, 0, 0] }], num_detections: 1, image_size: { width: 640, height: 480 }, input_size: [560, 560], threshold: 0.5, timing_ms: { total: 1 } }));
  });
  try {
    const starting = await runBin(['smoke', '--url', server.url, '--wait', '1.2']);
    assert.equal(starting.code, 1);
    // Polled every 0.5 s within the 1.2 s: more than one check (a smoke that gave up at the first 503 makes one).
    assert.ok(readyChecks >= 2, `waited: ${readyChecks} /ready check(s)`);
    assert.match(starting.stdout, /^FAIL http:\/\/127\.0\.0\.1:\d+ not ready after 1\.2 s: \/ready 503 \{"status":"starting"\}\n$/);
    mode = 'malformed';
    const malformed = await runBin(['smoke', '--url', server.url]);
    assert.equal(malformed.code, 1);
    assert.match(malformed.stdout, /^FAIL malformed response: detection 0 box \[0,0,700,10\] is not \[x1, y1, x2, y2\] inside the 640x480 image\n$/);
    mode = 'error';
    const error = await runBin(['smoke', '--url', server.url]);
    assert.equal(error.code, 1);
    assert.match(error.stdout, /^FAIL POST .*\/predict answered 500: inference failed: RuntimeError: device hung\n$/);
    const nobody = await runBin(['smoke', '--url', 'http://127.0.0.1:9']);
    assert.equal(nobody.code, 1);
    assert.match(nobody.stdout, /^FAIL http:\/\/127\.0\.0\.1:9 not ready after 0 s: GET http:\/\/127\.0\.0\.1:9\/ready failed: ECONNREFUSED/);
    const usage = await runBin(['smoke', '--url', server.url, '--expect', 'cat=2']);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--expect.*expected label:count pairs .* but received "cat=2"/);
  } finally {
    await server.close();
  }
});
