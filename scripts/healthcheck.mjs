#!/usr/bin/env node
// The container HEALTHCHECK: exit 0 when the server's readiness route answers 200, else 1. Readiness (not
// /health, which is 200 while starting) so an orchestrator sees "unhealthy" until the model is warm.
// RFDETR_HEALTHCHECK_URL overrides the URL when `rfdetr serve` is given another --port.
const url = process.env.RFDETR_HEALTHCHECK_URL || 'http://127.0.0.1:20000/ready';
const timeoutMs = Number(process.env.RFDETR_HEALTHCHECK_TIMEOUT_MS || 4000);
try {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  await res.arrayBuffer();
  if (res.status !== 200) {
    console.error(`healthcheck: ${url} answered ${res.status}, expected 200 (the model is starting, draining or failed)`);
    process.exit(1);
  }
} catch (err) {
  console.error(`healthcheck: ${url} did not answer: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}
