// /metrics names: prom-client's process and Node series keep their standard names (process_cpu_seconds_total,
// nodejs_eventloop_lag_seconds, …) so standard dashboards and alerts find them; the server's own series keep the
// rfdetr_ prefix. Tested on ServerMetrics' registry, the text /metrics serves.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ServerMetrics } from '../../src/http/metrics.ts';

test('metrics: default process/Node metrics under their standard names, our own with rfdetr_', async () => {
  const text = await new ServerMetrics().registry.metrics();
  const names = new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
  for (const n of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'process_start_time_seconds', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes']) {
    assert.ok(names.has(n), `${n} missing; have ${[...names].filter((x) => /process|nodejs/.test(x)).slice(0, 8).join(', ')}`);
  }
  assert.deepEqual([...names].filter((n) => /^rfdetr_(process|nodejs)_/.test(n)), [], 'no rfdetr_-prefixed default metrics');
  for (const n of ['rfdetr_http_requests_total', 'rfdetr_predict_stage_seconds', 'rfdetr_engine_state', 'rfdetr_predict_rejected_total', 'rfdetr_images_decoded_total']) {
    assert.ok(names.has(n), `${n} missing`);
  }
  const own = [...names].filter((n) => !/^(process|nodejs)_/.test(n));
  assert.deepEqual(own.filter((n) => !n.startsWith('rfdetr_')), [], 'every series of ours is rfdetr_-prefixed');
});

test('metrics: defaultMetrics: false registers only our own series', async () => {
  const text = await new ServerMetrics({ defaultMetrics: false }).registry.metrics();
  assert.doesNotMatch(text, /^# TYPE (process|nodejs)_/m);
});
