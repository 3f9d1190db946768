// `rfdetr detect http(s)://…`: the image is fetched (any host: the user typed it) and answered like a file;
// a URL that fails is reported by name and counted as a failed input. The image server is on loopback.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { CASES, caseImage, runInProcess } from './helpers.ts';

let srv: http.Server;
let base: string;
before(async () => {
  srv = http.createServer((req, res) => {
    if (req.url === '/pics/first.png') return res.writeHead(200).end(fs.readFileSync(caseImage(CASES[0])));
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
});
after(() => new Promise((r) => srv.close(r)));

test('detect --json URL: the same line as for the file, with the URL as "image"; --save names it after the path', async () => {
  const save = fs.mkdtempSync(path.join(os.tmpdir(), 'rfdetr-url-'));
  try {
    const byUrl = await runInProcess(['detect', '--json', '--save', save, `${base}/pics/first.png`]);
    assert.equal(byUrl.code, 0, byUrl.stderr);
    const byFile = await runInProcess(['detect', '--json', caseImage(CASES[0])]);
    const u = JSON.parse(byUrl.stdout);
    const f = JSON.parse(byFile.stdout);
    assert.equal(u.image, `${base}/pics/first.png`);
    assert.deepEqual(u.detections, f.detections);
    assert.deepEqual(fs.readdirSync(save), ['first.png']);
  } finally {
    fs.rmSync(save, { recursive: true, force: true });
  }
});

test('detect URL that answers 404: named on stderr, the other inputs still run, exit non-zero', async () => {
  const r = await runInProcess(['detect', '--json', `${base}/missing.png`, caseImage(CASES[1])]);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /missing\.png" could not be fetched: the server answered 404/);
  assert.equal(r.stdout.trim().split('\n').length, 1, 'the file input was answered');
});

test('serve --allow-url-host takes a host name or address, not a URL', async () => {
  const r = await runInProcess(['serve', '--allow-url-host', 'http://x.com/']);
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr, /--allow-url-host <host>' argument 'http:\/\/x\.com\/' is invalid\. expected HOST or HOST:PORT .* but received "http:\/\/x\.com\/"/);
});
