// Tests only: the server's OpenAPI document checked by an OpenAPI validator from npm, and every JSON response a
// test server sends checked against the document. express's response.json is wrapped once, so a response of
// any test that starts a server through test/http/helpers.ts is recorded and checked when that server stops.
import express from 'express';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { buildOpenApi } from '../../src/http/openapi.ts';

export interface CapturedResponse {
  app: unknown;
  method: string;
  path: string;
  status: number;
  body: unknown;
}

const captured: CapturedResponse[] = [];
let installed = false;

/** Records every `res.json(body)` of every express app in this process from now on. */
export function captureResponses(): void {
  if (installed) return;
  installed = true;
  const original = express.response.json;
  express.response.json = function json(this: express.Response, body: unknown) {
    captured.push({ app: this.req.app, method: this.req.method, path: this.req.path, status: this.statusCode, body });
    return original.call(this, body);
  };
}

/** The responses recorded for `app`, removed from the record. */
export function takeCaptured(app: unknown): CapturedResponse[] {
  const mine = captured.filter((c) => c.app === app);
  for (const c of mine) captured.splice(captured.indexOf(c), 1);
  return mine;
}

const DOC_ID = 'rfdetr-openapi.json';
let checker: { doc: any; ajv: Ajv2020 } | undefined;

function docChecker(): { doc: any; ajv: Ajv2020 } {
  if (checker) return checker;
  const doc = buildOpenApi({ maxImageBytes: 32 << 20, maxImageSide: 8192, maxBodyBytes: 64 << 20 }) as any;
  // The document is not itself a JSON Schema: unknown keywords (openapi, paths) and formats (binary) are ignored.
  const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
  ajv.addSchema({ ...doc, $id: DOC_ID });
  checker = { doc, ajv };
  return checker;
}

/** The OpenAPI validator's verdict on the server's document. */
export async function validateDocument(doc: object): Promise<{ valid: boolean; errors: unknown }> {
  const v = new Validator();
  const r = await v.validate(structuredClone(doc) as Parameters<Validator["validate"]>[0]);
  return { valid: r.valid, errors: r.errors };
}

const pointer = (...parts: string[]) => parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

/** Why `r` does not match the document (undefined when it does). */
export function responseMismatch(r: CapturedResponse): string | undefined {
  const { doc, ajv } = docChecker();
  const method = r.method === 'HEAD' ? 'get' : r.method.toLowerCase();
  // A templated path (/v1/vision/custom/{model}) matches one segment per parameter.
  const template = Object.keys(doc.paths).find((p) => p.includes('{') && new RegExp(`^${p.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(r.path));
  const docPath = r.path in doc.paths ? r.path : template ?? r.path;
  const item = doc.paths[docPath];
  let at: string;
  if (!item) {
    if (r.status !== 404) return `${r.method} ${r.path}: not a documented path, yet answered ${r.status}`;
    at = pointer('components', 'responses', 'NotFound');
  } else {
    const op = item[method];
    if (!op) {
      if (r.status !== 405) return `${r.method} ${r.path}: not a documented method, yet answered ${r.status}`;
      at = pointer('components', 'responses', 'MethodNotAllowed');
    } else {
      let response = op.responses[String(r.status)] ?? op.responses.default;
      if (!response) return `${r.method} ${r.path} → ${r.status}: the document declares no such status (it has ${Object.keys(op.responses).join(', ')})`;
      at = pointer('paths', docPath, method, 'responses', String(r.status) in op.responses ? String(r.status) : 'default');
      if (response.$ref) {
        at = response.$ref.slice(2);
        response = at.split('/').reduce((o: any, k: string) => o[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
      }
      if (!response.content?.['application/json']) return `${r.method} ${r.path} → ${r.status}: the document declares no JSON body`;
    }
  }
  const validate = ajv.getSchema(`${DOC_ID}#/${at}/content/application~1json/schema`);
  if (!validate) return `no schema at ${at}`;
  if (validate(r.body)) return undefined;
  return `${r.method} ${r.path} → ${r.status}: ${ajv.errorsText(validate.errors)}; body ${JSON.stringify(r.body).slice(0, 400)}`;
}

/** Throws naming every response recorded for `app` that the document does not describe. */
export function assertCapturedMatch(app: unknown): number {
  const mine = takeCaptured(app);
  const bad = mine.map(responseMismatch).filter((m): m is string => m !== undefined);
  if (bad.length) throw new Error(`${bad.length} of ${mine.length} responses do not match /openapi.json:\n${bad.slice(0, 10).join('\n')}`);
  return mine.length;
}
