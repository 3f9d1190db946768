// The OpenAPI document: an OpenAPI validator from npm accepts it, its schemas are the validator's (one source),
// and the response check the HTTP tests run on every captured response can fail.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildOpenApi } from '../../src/http/openapi.ts';
import { ERRORS } from '../../src/errors.ts';
import { PredictRequest } from '../../src/http/schema.ts';
import { responseMismatch, validateDocument } from '../helpers/openapi-check.ts';
import { goldens, postJson, start } from './helpers.ts';

const limits = { maxImageBytes: 32 << 20, maxImageSide: 8192, maxBodyBytes: 64 << 20 };

test('@seriousme/openapi-schema-validator accepts the document', async () => {
  const r = await validateDocument(buildOpenApi(limits));
  assert.equal(r.valid, true, JSON.stringify(r.errors, null, 1));
});

test('the validator rejects a broken document (the check can fail)', async () => {
  const doc: any = buildOpenApi(limits);
  doc.paths['/health'].get.responses['200'] = { content: {} };
  assert.equal((await validateDocument(doc)).valid, false);
});

test('the request schema in the document is the one the validator compiles; error codes are the error table', () => {
  const doc: any = buildOpenApi(limits);
  assert.deepEqual(doc.components.schemas.PredictRequest, JSON.parse(JSON.stringify(PredictRequest)));
  const codes = doc.components.schemas.ErrorCode.anyOf.map((b: any) => b.const);
  assert.deepEqual(codes, Object.keys(ERRORS));
  const declared422 = doc.paths['/predict'].post.responses['422'].content['application/json'].schema.allOf[1].properties.code.enum;
  assert.deepEqual(declared422, ['E_SCHEMA']);
  const s503 = doc.paths['/predict'].post.responses['503'].content['application/json'].schema.allOf[1].properties.code.enum;
  assert.deepEqual(s503, Object.keys(ERRORS).filter((c) => ERRORS[c as keyof typeof ERRORS].status === 503));
});

test('the response check rejects bodies the document does not describe', () => {
  const ok = { app: null, method: 'GET', path: '/health', status: 200, body: { status: 'ok', model: 'RF-DETR-base', device: null, models: [] } };
  assert.equal(responseMismatch(ok), undefined);
  assert.match(responseMismatch({ ...ok, body: { status: 'fine', model: 'RF-DETR-base', device: null } })!, /status/);
  assert.match(responseMismatch({ ...ok, path: '/predict', method: 'POST', status: 422, body: { detail: 'x', code: 'E_QUEUE_FULL', request_id: 'r' } })!, /code/);
  assert.match(responseMismatch({ ...ok, status: 418 })!, /declares no such status/);
  assert.match(responseMismatch({ ...ok, path: '/nope', status: 404, body: { detail: 'x', code: 'E_NOT_FOUND' } })!, /request_id/);
});

test('a server\'s responses, errors included, all match the document', async () => {
  const s = await start();
  try {
    const png = goldens()[0]!.png.toString('base64');
    assert.equal((await postJson(s.url, { image: png, return_raw: true })).status, 200);
    assert.equal((await postJson(s.url, { image: png, threshold: 7 })).status, 422);
    for (const p of ['/health', '/tt-liveness', '/ready', '/v1/health', '/info', '/v1/models', '/openapi.json', '/nope']) await (await fetch(`${s.url}${p}`)).text();
    await (await fetch(`${s.url}/health`, { method: 'DELETE' })).text();
  } finally {
    await s.stop();
  }
});
