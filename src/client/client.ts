// An HTTP client for a running rfdetr server (or any server speaking seed 000 §3's contract): POST /predict
// with a base64 JSON body (the contract's own form, which every implementation accepts), GET /ready with a
// fallback to /health's "status" for servers that have no /ready (the reference FastAPI app). undici.
import { Agent, request, type Dispatcher } from 'undici';
import { ERRORS, RfdetrError, type ErrorCode } from '../errors.ts';
import type { PredictResponse } from '../detect/pipeline.ts';
import type { PredictParams } from '../detect/params-schema.ts';

export interface ClientOptions {
  /** Connect timeout and per-request headers/body timeout, ms. Default 300 000 (a cold engine can be slow). */
  timeoutMs?: number;
}

/** The /predict parameters to send (any subset; the server applies its defaults to the rest), and an abort. */
export type PredictRequest = Partial<PredictParams> & { signal?: AbortSignal };

export interface Readiness {
  ready: boolean;
  /** Which route answered and how, e.g. "/ready 503" or "/health status=starting". */
  detail: string;
}

/** The server answered with an error status: carries the status and the body's `code` when it is one of ours. */
export class HttpStatusError extends RfdetrError {
  constructor(readonly httpStatus: number, code: ErrorCode, message: string, readonly body: unknown) {
    super(code, message, { http_status: httpStatus });
  }
}

/** A connection-level failure (refused, reset, DNS, timeout): the server could not be talked to at all. */
export class UnreachableError extends Error {
  override name = 'UnreachableError';
}

function codeForStatus(status: number): ErrorCode {
  if (status === 400) return 'E_IMAGE_UNDECODABLE';
  if (status === 413) return 'E_BODY_TOO_LARGE';
  if (status === 415) return 'E_UNSUPPORTED_MEDIA';
  if (status === 422) return 'E_SCHEMA';
  if (status === 503) return 'E_STARTING';
  if (status === 504) return 'E_DEADLINE';
  return 'E_INFERENCE';
}

function detailOf(body: unknown, text: string): string {
  if (body && typeof body === 'object') {
    const d = (body as { detail?: unknown }).detail;
    if (typeof d === 'string') return d;
    if (d !== undefined) return JSON.stringify(d);
  }
  return text.length > 300 ? `${text.slice(0, 300)}…` : text;
}

export class RfdetrClient {
  readonly baseUrl: URL;
  readonly #dispatcher: Dispatcher;

  constructor(url: string, opts: ClientOptions = {}) {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw new RfdetrError('E_USAGE', `--url: expected an http(s) URL like http://127.0.0.1:20000 but received ${JSON.stringify(url)}`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') {
      throw new RfdetrError('E_USAGE', `--url: expected an http:// or https:// URL but received ${JSON.stringify(url)}`);
    }
    if (!u.pathname.endsWith('/')) u.pathname += '/';
    this.baseUrl = u;
    const timeout = opts.timeoutMs ?? 300_000;
    this.#dispatcher = new Agent({ connect: { timeout: Math.min(timeout, 30_000) }, headersTimeout: timeout, bodyTimeout: timeout });
  }

  #url(route: string): string {
    return new URL(route.replace(/^\//, ''), this.baseUrl).toString();
  }

  async #send(method: 'GET' | 'POST', route: string, body?: string, signal?: AbortSignal): Promise<{ status: number; text: string; json: unknown }> {
    const url = this.#url(route);
    let res: Dispatcher.ResponseData;
    try {
      res = await request(url, {
        method, dispatcher: this.#dispatcher, signal,
        ...(body !== undefined ? { body, headers: { 'content-type': 'application/json' } } : {}),
      });
    } catch (e) {
      const err = e as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
      const why = err.code ?? err.cause?.code ?? err.message;
      throw new UnreachableError(`${method} ${url} failed: ${why}; is the server running there (rfdetr serve --port …)?`, { cause: e });
    }
    const text = await res.body.text();
    let json: unknown;
    try {
      json = text.length ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.statusCode, text, json };
  }

  /** POST /predict with the image bytes; throws HttpStatusError on a non-200 answer. */
  async predict(bytes: Uint8Array, req: PredictRequest = {}): Promise<PredictResponse> {
    const { signal, ...params } = req;
    const payload = { image: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('base64'), ...params };
    const r = await this.#send('POST', '/predict', JSON.stringify(payload), signal);
    if (r.status !== 200) {
      const c = (r.json as { code?: unknown } | undefined)?.code;
      const code: ErrorCode = typeof c === 'string' && c in ERRORS ? (c as ErrorCode) : codeForStatus(r.status);
      throw new HttpStatusError(r.status, code, `POST ${this.#url('/predict')} answered ${r.status}: ${detailOf(r.json, r.text)}`, r.json);
    }
    const body = r.json as PredictResponse | undefined;
    if (!body || typeof body !== 'object' || !Array.isArray(body.detections)) {
      throw new RfdetrError('E_PROTOCOL', `POST ${this.#url('/predict')} answered 200 but not with a /predict response object (expected {"detections": [...], ...}): ${detailOf(r.json, r.text)}`);
    }
    return body;
  }

  /** One readiness check: GET /ready (200 = ready); a server without /ready (404) is asked GET /health instead. */
  async readiness(): Promise<Readiness> {
    const r = await this.#send('GET', '/ready');
    if (r.status === 200) return { ready: true, detail: '/ready 200' };
    if (r.status !== 404) return { ready: false, detail: `/ready ${r.status}${r.json ? ` ${JSON.stringify(r.json)}` : ''}` };
    const h = await this.#send('GET', '/health');
    const status = (h.json as { status?: unknown } | undefined)?.status;
    return { ready: h.status === 200 && status === 'ok', detail: `/health ${h.status} status=${String(status)}` };
  }

  /**
   * Polls readiness until ready or `waitS` seconds have passed (0: one check). Connection failures count as
   * "not ready yet" while waiting. Resolves with the last readiness; never throws for a not-ready server.
   */
  async waitReady(waitS: number, pollMs = 500): Promise<Readiness> {
    const until = Date.now() + waitS * 1000;
    for (;;) {
      let r: Readiness;
      try {
        r = await this.readiness();
      } catch (e) {
        r = { ready: false, detail: (e as Error).message };
      }
      if (r.ready || Date.now() + pollMs > until) return r;
      await new Promise((res) => setTimeout(res, pollMs));
    }
  }

  /** GET /info (parsed JSON), or undefined when the server has none. */
  async info(): Promise<unknown> {
    const r = await this.#send('GET', '/info');
    return r.status === 200 ? r.json : undefined;
  }

  async close(): Promise<void> {
    await this.#dispatcher.close();
  }
}
