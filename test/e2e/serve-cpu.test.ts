// End to end through every layer: POST /predict → the supervised C++ sidecar with the cpu engine on the seed-1
// synthetic checkpoint, which decodes the fixture PNG itself (SERVING.md, "Where images are decoded"; the CLI's
// e2e tests cover sharp's decode in the server) and resizes it → postprocess → JSON, compared with the fixtures'
// detections.json (made by the upstream reference on the same weights and images).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { testFixturesDir } from '../../src/config/paths.ts';
import { createBackend } from '../../src/sidecar/index.ts';
import { createServer } from '../../src/http/index.ts';
import { synthWeights } from '../helpers/synth-weights.ts';

interface FixtureDetection { query: number; label: number; label_name: string; score: number; box_xyxy: number[] }
interface ApiDetection { label: string; label_id: number; score: number; box: number[] }

const cases = ['case-1', 'case-2', 'case-3'];

test('serve (cpu engine, real sidecar): /predict on every fixture image equals detections.json at 0.5 and 0.3', async (t) => {
  const weightsDir = await synthWeights(1n);
  const backend = createBackend({ engine: 'cpu', weightsDir, threads: 2, startupTimeoutMs: 300_000, defaultDeadlineMs: 300_000 });
  await backend.ready();
  const server = createServer({ backend, queueSize: 8, deadlineMs: 300_000, logLevel: 'error' });
  const { url } = await server.listen('127.0.0.1', 0);
  t.after(async () => {
    await server.drain(10_000);
  });
  const ready = await fetch(`${url}/ready`);
  assert.equal(ready.status, 200, 'ready once the backend is');
  const health = (await (await fetch(`${url}/health`)).json()) as { status: string; device: string | null };
  assert.equal(health.status, 'ok');
  assert.match(String(health.device), /threads/);
  // Every image below goes to the sidecar as the file: its answer to `decoders` is in before the first one.
  await backend.decodersKnown();
  assert.equal(backend.decodes('png'), true, 'the cpu sidecar decodes PNG');

  for (const name of cases) {
    const dir = path.join(testFixturesDir, 'rfdetr-synth', name);
    const image = fs.readFileSync(path.join(dir, 'input.png')).toString('base64');
    const fixture = JSON.parse(fs.readFileSync(path.join(dir, 'detections.json'), 'utf8')) as { detections: Record<string, FixtureDetection[]> };
    for (const thr of ['0.5', '0.3']) {
      const res = await fetch(`${url}/predict`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ image, threshold: Number(thr), max_detections: 300 }),
      });
      assert.equal(res.status, 200, await res.clone().text());
      const body = (await res.json()) as { detections: ApiDetection[]; num_detections: number; timing_ms: Record<string, number> };
      const want = fixture.detections[thr]!;
      assert.equal(body.num_detections, want.length, `${name} @${thr}: detection count`);
      // The engine is an independent float32 implementation (logits within ~5e-5 of the reference): every
      // reference detection must have its own match (same label, score within 1e-4, box within 0.05 px);
      // matching, not position, because two scores closer than the engine's noise may swap places.
      let maxScore = 0;
      let maxBox = 0;
      const unused = new Set(body.detections.map((_, i) => i));
      for (const w of want) {
        let best = -1;
        let bestErr = Infinity;
        for (const i of unused) {
          const d = body.detections[i]!;
          if (d.label_id !== w.label || d.label !== w.label_name) continue;
          const err = Math.max(...d.box.map((v, k) => Math.abs(v - w.box_xyxy[k]!)));
          if (err < bestErr) [best, bestErr] = [i, err];
        }
        assert.ok(best >= 0, `${name} @${thr}: no detection matches reference query ${w.query} (${w.label_name} ${w.score})`);
        unused.delete(best);
        maxScore = Math.max(maxScore, Math.abs(body.detections[best]!.score - w.score));
        maxBox = Math.max(maxBox, bestErr);
      }
      const scores = body.detections.map((d) => d.score);
      assert.deepEqual(scores, [...scores].sort((a, b) => b - a), 'sorted by score, descending');
      assert.ok(maxScore <= 1e-4, `${name} @${thr}: score max |Δ| ${maxScore}`);
      assert.ok(maxBox <= 0.05, `${name} @${thr}: box max |Δ| ${maxBox} px`);
      assert.ok(body.timing_ms.inference! > 0 && body.timing_ms.total! >= body.timing_ms.inference!);
      t.diagnostic(`${name} @${thr}: ${want.length} detections, score max |Δ| ${maxScore.toExponential(2)}, box max |Δ| ${maxBox.toExponential(2)} px, inference ${body.timing_ms.inference!.toFixed(0)} ms`);
    }
  }
  const metrics = await (await fetch(`${url}/metrics`)).text();
  assert.match(metrics, new RegExp(`rfdetr_images_decoded_total\\{by="sidecar"\\} ${cases.length * 2}\\b`), 'every fixture image was decoded by the sidecar');
});
