// The /predict features through the real sidecar (cpu engine, seed-1 synthetic checkpoint): images: [...],
// classes, return_image and image_url (from a loopback image server, allowed explicitly), each answered as
// the plain single-image request on the same engine answers; every JSON response matches /openapi.json.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { testFixturesDir } from '../../src/config/paths.ts';
import { createBackend } from '../../src/sidecar/index.ts';
import { createServer } from '../../src/http/index.ts';
import { synthWeights } from '../helpers/synth-weights.ts';
import { assertCapturedMatch, captureResponses } from '../helpers/openapi-check.ts';

captureResponses();
const png = (name: string) => fs.readFileSync(path.join(testFixturesDir, 'rfdetr-synth', name, 'input.png'));

async function post(url: string, body: object): Promise<any> {
  const res = await fetch(`${url}/predict`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const json = await res.json();
  assert.equal(res.status, 200, JSON.stringify(json).slice(0, 300));
  return json;
}

test('serve (cpu engine, real sidecar): images, classes, return_image and image_url', async (t) => {
  const images = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(png('case-2')));
  await new Promise<void>((r) => images.listen(0, '127.0.0.1', r));
  const imagesPort = (images.address() as AddressInfo).port;
  const weightsDir = await synthWeights(1n);
  const backend = createBackend({ engine: 'cpu', weightsDir, threads: 2, startupTimeoutMs: 300_000, defaultDeadlineMs: 300_000 });
  await backend.ready();
  const server = createServer({ backend, queueSize: 8, deadlineMs: 300_000, logLevel: 'error', allowUrlHosts: [`127.0.0.1:${imagesPort}`] });
  const { url } = await server.listen('127.0.0.1', 0);
  t.after(async () => {
    await server.drain(10_000);
    await new Promise((r) => images.close(r));
  });

  const one = await post(url, { image: png('case-1').toString('base64'), threshold: 0.3, max_detections: 300 });
  const two = await post(url, { image: png('case-2').toString('base64'), threshold: 0.3, max_detections: 300 });
  const forwards = server.engine.forwardCount;
  const batch = await post(url, { images: [png('case-1').toString('base64'), png('case-2').toString('base64')], threshold: 0.3, max_detections: 300 });
  assert.equal(server.engine.forwardCount - forwards, 2, 'one forward per image');
  assert.deepEqual(batch.results.map((r: any) => r.detections), [one.detections, two.detections]);

  const label = one.detections[0].label as string;
  const filtered = await post(url, { image: png('case-1').toString('base64'), threshold: 0.3, classes: [label] });
  assert.deepEqual(filtered.detections, one.detections.filter((d: any) => d.label === label));

  const drawn = await post(url, { image: png('case-1').toString('base64'), return_image: 'jpeg' });
  const meta = await sharp(Buffer.from(drawn.annotated_image.base64, 'base64')).metadata();
  assert.equal(meta.format, 'jpeg');
  assert.deepEqual([meta.width, meta.height], [one.image_size.width, one.image_size.height]);

  const port = (images.address() as AddressInfo).port;
  const byUrl = await post(url, { image_url: `http://127.0.0.1:${port}/case-2.png`, threshold: 0.3, max_detections: 300 });
  assert.deepEqual(byUrl.detections, two.detections);
  t.diagnostic(`${assertCapturedMatch(server.app)} responses match /openapi.json`);
});
