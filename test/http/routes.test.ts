// Every route other than /predict's body handling: the reference app's /health, /info and /v1/models, the probes, the
// metrics, the OpenAPI document, 404/405, request ids, the per-request log line and the one ready line.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { READY_MESSAGE } from '../../src/http/log.ts';
import { RfdetrError } from '../../src/errors.ts';
import { FakeBackend, goldens, postJson, start, waitFor } from './helpers.ts';

const png = () => goldens()[0]!.png.toString('base64');

describe('while starting', () => {
  test('health 200 "starting", readiness 503, predict 503 with Retry-After, liveness 200; then one ready line', async () => {
    const backend = new FakeBackend();
    backend.state = 'starting';
    const info = backend.info;
    backend.info = null;
    const s = await start({ backend });
    try {
      const h = await fetch(`${s.url}/health`);
      assert.equal(h.status, 200);
      assert.deepEqual(await h.json(), {
        status: 'starting', model: 'RF-DETR-base', device: null,
        models: [{ id: 'Roboflow/rf-detr-base', alias: 'rf-detr-base', name: 'RF-DETR-base', task: 'object-detection', input_size: [560, 560], state: 'starting', failure: null }],
      });
      for (const p of ['/ready', '/v1/health']) {
        const r = await fetch(`${s.url}${p}`);
        assert.equal(r.status, 503, p);
        assert.equal(r.headers.get('retry-after'), '5');
        const body: any = await r.json();
        assert.equal(body.code, 'E_STARTING');
        assert.match(body.detail, /starting/);
      }
      const live = await fetch(`${s.url}/tt-liveness`);
      assert.equal(live.status, 200);
      const lb: any = await live.json();
      assert.equal(lb.status, 'alive');
      assert.equal(lb.model_ready, false);
      assert.equal(lb.engine_state, 'starting');
      const p = await postJson(s.url, { image: png() });
      assert.equal(p.status, 503);
      assert.equal(p.json.code, 'E_STARTING');
      assert.equal(p.headers.get('retry-after'), '5');
      assert.equal(backend.calls, 0);
      assert.equal(s.logs.filter((l) => l.msg === READY_MESSAGE).length, 0, 'no ready line before the engine is ready');

      backend.info = info;
      backend.state = 'ready';
      await waitFor(() => s.logs.some((l) => l.msg === READY_MESSAGE), 'the ready line');
      const r = await fetch(`${s.url}/ready`);
      assert.equal(r.status, 200);
      assert.deepEqual(await r.json(), {});
      assert.equal((await fetch(`${s.url}/v1/health`)).status, 200);
      const h2: any = await (await fetch(`${s.url}/health`)).json();
      assert.deepEqual({ ...h2, models: h2.models.map((m: { id: string; state: string }) => [m.id, m.state]) }, { status: 'ok', model: 'RF-DETR-base', device: 'fake device (test)', models: [['Roboflow/rf-detr-base', 'ready']] });
      // A restart and recovery do not log a second ready line, and count one restart.
      backend.restarts = 1;
      backend.state = 'restarting';
      const liveState = async () => ((await (await fetch(`${s.url}/tt-liveness`)).json()) as any).engine_state;
      assert.equal(await liveState(), 'restarting');
      assert.equal(((await (await fetch(`${s.url}/health`)).json()) as any).status, 'starting');
      assert.equal((await postJson(s.url, { image: png() })).json.code, 'E_STARTING');
      backend.state = 'ready';
      assert.equal(await liveState(), 'ready');
      const ready = s.logs.filter((l) => l.msg === READY_MESSAGE);
      assert.equal(ready.length, 1);
      assert.equal(ready[0]!.url, s.url);
      const m = await (await fetch(`${s.url}/metrics`)).text();
      assert.match(m, /^rfdetr_sidecar_restarts_total 1$/m);
      assert.match(m, /^rfdetr_engine_state\{state="ready"\} 1$/m);
      assert.match(m, /^rfdetr_engine_state\{state="starting"\} 0$/m);
    } finally {
      await s.stop();
    }
  });

  test('a failed engine: readiness 503 E_SIDECAR_FAILED with the reason, predict 503, health 200 "starting"', async () => {
    const backend = Object.assign(new FakeBackend(), { failureReason: 'the sidecar crashed 5 times in the last 3 minutes' });
    backend.state = 'failed';
    const s = await start({ backend });
    try {
      const r = await fetch(`${s.url}/ready`);
      assert.equal(r.status, 503);
      const body: any = await r.json();
      assert.equal(body.code, 'E_SIDECAR_FAILED');
      assert.match(body.detail, /not restarting \(the sidecar crashed 5 times in the last 3 minutes\)/);
      assert.equal((await postJson(s.url, { image: png() })).status, 503);
      assert.equal(((await (await fetch(`${s.url}/health`)).json()) as any).status, 'starting');
    } finally {
      await s.stop();
    }
  });
});

describe('when ready', () => {
  test('a backend that counts its restarts drives rfdetr_sidecar_restarts_total', async () => {
    const backend = Object.assign(new FakeBackend(), { restarts: 1 });
    const s = await start({ backend });
    try {
      backend.restarts = 4; // no state change announces it: the scrape itself must re-read the count
      const m = await (await fetch(`${s.url}/metrics`)).text();
      assert.match(m, /^rfdetr_sidecar_restarts_total 3$/m, 'restarts since the server started');
    } finally {
      await s.stop();
    }
  });

  test('/v1/models is the reference app\'s OpenAI-shaped list', async () => {
    const s = await start();
    try {
      const r = await fetch(`${s.url}/v1/models`);
      assert.equal(r.status, 200);
      assert.deepEqual(await r.json(), { object: 'list', data: [{ id: 'Roboflow/rf-detr-base', object: 'model', owned_by: 'changh95', task: 'object-detection', input_size: [560, 560], state: 'ready' }] });
    } finally {
      await s.stop();
    }
  });

  test('/info reports model, task, engine, weights, limits, labels and serving parameters', async () => {
    const weights = { repo: 'Roboflow/rf-detr-base', revision: '7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a', source: 'synth', dir: '/srv/secret/snapshot', files: { model: '/srv/secret/snapshot/model.safetensors', config: '/srv/secret/snapshot/config.json' } };
    const s = await start({ weights, queueSize: 7, deadlineMs: 1234, deviceParams: { threads: 2 }, logLevel: 'info' });
    try {
      const b: any = await (await fetch(`${s.url}/info`)).json();
      assert.equal(b.model, 'RF-DETR-base');
      assert.equal(b.task, 'object-detection');
      assert.equal(b.hardware.engine, 'fake');
      assert.equal(b.hardware.device, 'fake device (test)');
      // Repo, revision and file names; no filesystem path outside debug level.
      assert.deepEqual(b.weights, { repo: weights.repo, revision: weights.revision, source: 'synth', synthetic: false, files: { model: 'model.safetensors', config: 'config.json' } });
      assert.doesNotMatch(JSON.stringify(b), /\/srv\/secret/);
      assert.deepEqual(b.input.input_size, [560, 560]);
      assert.equal(b.input.batch, 1);
      assert.equal(b.input.images_per_request, 16);
      assert.equal(b.input.max_image_side, 8192);
      assert.equal(b.input.max_image_bytes, 32 * 1024 * 1024);
      assert.equal(b.labels['17'], 'cat');
      assert.equal(b.labels['0'], 'N/A');
      assert.equal(Object.keys(b.labels).length, 91);
      assert.deepEqual(b.serving, {
        queue_size: 7, client_queue_share: 4, deadline_ms: 1234, prep_concurrency: b.serving.prep_concurrency, engine_concurrency: 1, max_bodies: 256,
        body_timeout_ms: 30000, memory_limit_bytes: 1024 * 1024 * 1024, max_image_work_bytes: 512 * 1024 * 1024, allow_url_hosts: [],
        api_keys: false, trust_proxy: false, decode_nice: null, server_nice: null, engine_nice: null, min_ready: 1, admin_reload: false,
      });
      assert.equal(b.device_params.threads, 2);
      assert.equal(b.source.tt_port.commit, '5b0149869465892477141b4c1dfc4622db0d1ec5');
    } finally {
      await s.stop();
    }
  });

  test('/openapi.json documents every route and the predict schema', async () => {
    const s = await start();
    try {
      const b: any = await (await fetch(`${s.url}/openapi.json`)).json();
      assert.equal(b.openapi, '3.1.0');
      assert.deepEqual(Object.keys(b.paths).sort(), [
        '/admin/reload', '/docs', '/health', '/infer/instance_segmentation', '/infer/object_detection', '/info', '/metrics', '/model/add', '/model/registry', '/openapi.json',
        '/predict', '/predict/video', '/ready', '/tt-liveness', '/v1/health', '/v1/models', '/v1/vision/custom/list', '/v1/vision/custom/{model}', '/v1/vision/detection',
      ]);
      const req = b.components.schemas.PredictRequest;
      assert.deepEqual(req.required, ['image']);
      assert.equal(req.properties.threshold.default, 0.5);
      assert.equal(req.properties.max_detections.maximum, 300);
      assert.deepEqual(Object.keys(b.paths['/predict'].post.responses).sort(), ['200', '400', '401', '403', '404', '405', '408', '413', '415', '422', '500', '502', '503', '504']);
      assert.deepEqual(Object.keys(b.paths['/predict'].post.requestBody.content).sort(), ['application/json', 'application/octet-stream', 'image/*', 'multipart/form-data']);
    } finally {
      await s.stop();
    }
  });

  test('unknown route → 404 JSON listing the routes; wrong method → 405 with Allow', async () => {
    const s = await start();
    try {
      const r = await fetch(`${s.url}/nope`);
      assert.equal(r.status, 404);
      const b: any = await r.json();
      assert.equal(b.code, 'E_NOT_FOUND');
      assert.match(b.detail, /no route GET \/nope: the routes are .*POST \/predict/);
      const g = await fetch(`${s.url}/predict`);
      assert.equal(g.status, 405);
      assert.equal(g.headers.get('allow'), 'POST');
      assert.match(((await g.json()) as any).detail, /Expected POST for \/predict but received GET/);
      const p = await fetch(`${s.url}/health`, { method: 'POST' });
      assert.equal(p.status, 405);
      assert.equal(p.headers.get('allow'), 'GET');
    } finally {
      await s.stop();
    }
  });

  test('request ids: a client id is echoed, a malformed one replaced; one JSON log line per request', async () => {
    const s = await start({ logLevel: 'info' });
    try {
      const r = await postJson(s.url, { image: png() }, { 'x-request-id': 'client-abc.123' });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('x-request-id'), 'client-abc.123');
      const bad = await postJson(s.url, { image: png(), threshold: 2 }, { 'x-request-id': 'has spaces\tand tabs' });
      const id = bad.headers.get('x-request-id')!;
      assert.match(id, /^[0-9a-f-]{36}$/);
      assert.equal(bad.json.request_id, id);
      const h = await fetch(`${s.url}/health`);
      assert.match(h.headers.get('x-request-id')!, /^[0-9a-f-]{36}$/);
      await waitFor(() => s.logs.filter((l) => l.event === 'request').length >= 2, 'two request lines');
      const lines = s.logs.filter((l) => l.event === 'request');
      assert.equal(lines.length, 2, 'probes are logged only at debug level');
      const ok = lines.find((l) => l.request_id === 'client-abc.123')!;
      assert.equal(ok.status, 200);
      assert.equal(ok.route, '/predict');
      assert.equal(ok.level, 'info');
      assert.equal(ok.num_detections, goldens()[0]!.detections['0.5']!.length);
      assert.equal(typeof (ok.timing_ms as any).inference, 'number');
      const fail = lines.find((l) => l.request_id === id)!;
      assert.equal(fail.status, 422);
      assert.equal(fail.error, 'E_SCHEMA');
      assert.equal(fail.level, 'warn');
    } finally {
      await s.stop();
    }
  });

  test('/metrics counts requests by route and status and observes every stage', async () => {
    const s = await start();
    s.backend.forwardMs = 20;
    try {
      assert.equal((await postJson(s.url, { image: png() })).status, 200);
      assert.equal((await postJson(s.url, { image: png() })).status, 200);
      assert.equal((await postJson(s.url, { image: png(), threshold: 7 })).status, 422);
      await fetch(`${s.url}/health`);
      const res = await fetch(`${s.url}/metrics`);
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type')!, /text\/plain/);
      const m = await res.text();
      assert.match(m, /^rfdetr_http_requests_total\{route="\/predict",method="POST",status="200"\} 2$/m);
      assert.match(m, /^rfdetr_http_requests_total\{route="\/predict",method="POST",status="422"\} 1$/m);
      assert.match(m, /^rfdetr_http_requests_total\{route="\/health",method="GET",status="200"\} 1$/m);
      for (const st of ['decode', 'preprocess', 'queue', 'transfer', 'inference', 'postprocess', 'total']) {
        assert.match(m, new RegExp(`^rfdetr_predict_stage_seconds_count\\{stage="${st}"\\} 2$`, 'm'), st);
      }
      assert.match(m, /^rfdetr_queue_depth\{stage="engine"\} 0$/m);
      assert.match(m, /^rfdetr_predict_in_flight 0$/m);
      assert.match(m, /^rfdetr_engine_busy_seconds_total [0-9.e-]+$/m);
      // The engine's own forward times, as the backend reported them: two forwards of 20 ms.
      assert.match(m, /^rfdetr_engine_forward_seconds_total 0\.04$/m);
      assert.match(m, /^rfdetr_engine_state\{state="ready"\} 1$/m);
    } finally {
      await s.stop();
    }
  });

  test('an engine failure → 500 "inference failed: <Type>: <text>", and the server keeps serving', async () => {
    const s = await start();
    try {
      s.backend.fail = new RfdetrError('E_INFERENCE', 'forward produced NaN in decoder layer 2', { type: 'EngineError' });
      const a = await postJson(s.url, { image: png() });
      assert.equal(a.status, 500);
      assert.equal(a.json.detail, 'inference failed: EngineError: forward produced NaN in decoder layer 2');
      assert.equal(a.json.code, 'E_INFERENCE');
      // Shaped as the sidecar client reports an engine error.
      s.backend.fail = new RfdetrError('E_INFERENCE', 'sidecar infer failed: E_FORWARD: out of memory allocating 3.8 MB', { wireCode: 'E_FORWARD' });
      const w = await postJson(s.url, { image: png() });
      assert.equal(w.status, 500);
      assert.equal(w.json.detail, 'inference failed: E_FORWARD: out of memory allocating 3.8 MB');
      s.backend.fail = new TypeError('cannot read properties of undefined');
      const b = await postJson(s.url, { image: png() });
      assert.equal(b.status, 500);
      assert.equal(b.json.detail, 'inference failed: TypeError: cannot read properties of undefined');
      s.backend.fail = new RfdetrError('E_SIDECAR_EXITED', 'the sidecar exited with signal SIGSEGV');
      const c = await postJson(s.url, { image: png() });
      assert.equal(c.status, 500);
      assert.equal(c.json.detail, 'inference failed: E_SIDECAR_EXITED: the sidecar exited with signal SIGSEGV');
      s.backend.fail = new RfdetrError('E_CLOSED', 'the backend was closed');
      const d = await postJson(s.url, { image: png() });
      assert.equal(d.status, 503, 'non-500 backend errors keep their own status');
      s.backend.fail = undefined;
      assert.equal((await postJson(s.url, { image: png() })).status, 200);
    } finally {
      await s.stop();
    }
  });
});
