#!/usr/bin/env node
// The HTTP side of scripts/image-smoke.sh, run on the host against the container's published port.
//
//   smoke-http.mjs ready URL SECONDS      wait until GET /ready is 200 (the container may still be loading)
//   smoke-http.mjs health URL             GET /health is 200 with status "ok"
//   smoke-http.mjs predict URL CASE_DIR   POST CASE_DIR/input.png to /predict (threshold 0.5): the detections
//                                         equal CASE_DIR/detections.json's (same label, score within 1e-4, box
//                                         within 0.05 px: the tolerances of test/e2e/serve-cpu.test.ts)
//   smoke-http.mjs inflight URL CASE_DIR N
//                                         sends N /predict at once, prints "in-flight" once /metrics shows one on
//                                         the engine (the caller then stops the container), and exits 0 when every
//                                         one of them was answered 200 with the fixture's detections
// Prints one line per check; exit 1 with the reason on a failure, 2 on a usage error.
import fs from 'node:fs';
import path from 'node:path';

const [cmd, url, ...rest] = process.argv.slice(2);
const usage = 'usage: smoke-http.mjs ready URL SECONDS | health URL | predict URL CASE_DIR | inflight URL CASE_DIR N';
if (!cmd || !url) {
  console.error(usage);
  process.exit(2);
}
function fail(msg) {
  console.error(`image-smoke: FAIL ${msg}`);
  process.exit(1);
}

async function ready(seconds) {
  const until = Date.now() + seconds * 1000;
  let last = 'no answer yet';
  while (Date.now() < until) {
    try {
      const res = await fetch(`${url}/ready`, { signal: AbortSignal.timeout(5000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
      last = `status ${res.status}`;
    } catch (err) {
      last = err.cause?.code ?? err.message;
    }
    await new Promise((r) => setTimeout(r, 500)); // a poll interval, not a synchronisation: the deadline decides
  }
  fail(`${url}/ready did not answer 200 within ${seconds} s (last: ${last})`);
}

function loadCase(dir) {
  const png = fs.readFileSync(path.join(dir, 'input.png'));
  const fixture = JSON.parse(fs.readFileSync(path.join(dir, 'detections.json'), 'utf8'));
  return { name: path.basename(dir), png, want: fixture.detections['0.5'] };
}

async function predictOnce(c) {
  const res = await fetch(`${url}/predict`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ image: c.png.toString('base64'), threshold: 0.5, max_detections: 300 }),
  });
  const text = await res.text();
  if (res.status !== 200) fail(`/predict answered ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

function compare(c, body) {
  if (body.num_detections !== c.want.length) {
    fail(`${c.name}: ${body.num_detections} detections, the fixture has ${c.want.length}`);
  }
  const unused = new Set(body.detections.map((_, i) => i));
  let maxScore = 0;
  let maxBox = 0;
  for (const w of c.want) {
    let best = -1;
    let bestErr = Infinity;
    for (const i of unused) {
      const d = body.detections[i];
      if (d.label_id !== w.label || d.label !== w.label_name) continue;
      const err = Math.max(...d.box.map((v, k) => Math.abs(v - w.box_xyxy[k])));
      if (err < bestErr) [best, bestErr] = [i, err];
    }
    if (best < 0) fail(`${c.name}: no detection matches the fixture's query ${w.query} (${w.label_name} ${w.score})`);
    unused.delete(best);
    maxScore = Math.max(maxScore, Math.abs(body.detections[best].score - w.score));
    maxBox = Math.max(maxBox, bestErr);
  }
  if (maxScore > 1e-4 || maxBox > 0.05) fail(`${c.name}: score max |d| ${maxScore}, box max |d| ${maxBox} px (limits 1e-4, 0.05)`);
  return `${c.name}: ${c.want.length} detections equal the fixture's (score max |d| ${maxScore.toExponential(2)}, box max |d| ${maxBox.toExponential(2)} px, inference ${body.timing_ms?.inference?.toFixed(0)} ms)`;
}

async function metric(name) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = text.match(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

if (cmd === 'ready' && rest.length === 1) {
  await ready(Number(rest[0]));
  console.log(`image-smoke: /ready 200`);
} else if (cmd === 'health' && rest.length === 0) {
  const res = await fetch(`${url}/health`);
  const body = await res.json();
  if (res.status !== 200 || body.status !== 'ok') fail(`/health answered ${res.status} ${JSON.stringify(body)}`);
  console.log(`image-smoke: /health 200 status ok (device ${body.device ?? '?'})`);
} else if (cmd === 'predict' && rest.length === 1) {
  const c = loadCase(rest[0]);
  console.log(`image-smoke: /predict ${compare(c, await predictOnce(c))}`);
} else if (cmd === 'inflight' && rest.length === 2) {
  const c = loadCase(rest[0]);
  const n = Number(rest[1]);
  const answers = Array.from({ length: n }, () => predictOnce(c));
  // Wait (bounded) until one of them is on the engine, then tell the caller to stop the container.
  const until = Date.now() + 60_000;
  while ((await metric('rfdetr_engine_forwards_in_flight')) < 1) {
    if (Date.now() > until) fail('no /predict reached the engine within 60 s');
    await new Promise((r) => setTimeout(r, 20));
  }
  console.log('in-flight');
  const bodies = await Promise.all(answers);
  for (const b of bodies) compare(c, b);
  console.log(`image-smoke: all ${n} requests sent before SIGTERM answered 200 with the fixture's detections`);
} else {
  console.error(usage);
  process.exit(2);
}
