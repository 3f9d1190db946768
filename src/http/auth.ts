// API keys: when the operator gives any (--api-key-file FILE, one key per line, re-read on reload(); or the
// RFDETR_API_KEYS environment variable, keys separated by commas or whitespace), every route except the
// probes needs `Authorization: Bearer KEY` or `X-API-Key: KEY` (exactly one of them: both → 401), or on the
// routes of other servers' APIs (Roboflow, DeepStack) their clients' `api_key` query parameter or body field; /metrics and /docs (with /openapi.json) are
// open only when the operator says so. Keys are compared as SHA-256 digests with timingSafeEqual, against
// every key (no early exit), so neither the time nor the length of the comparison tells a guess apart. A key
// is never logged or echoed: a client is named by a digest prefix (`key:1a2b3c4d`).
import { createHash, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import type { NextFunction, Request, Response } from 'express';
import { RfdetrError } from '../errors.ts';

/** Routes that answer without a key: load balancers and kubelets probe without credentials. */
export const PROBE_ROUTES = ['/health', '/ready', '/v1/health', '/tt-liveness'] as const;
export const DOCS_ROUTES = ['/docs', '/openapi.json'] as const;

export interface ApiKeySource {
  /** A file with one key per line (blank lines and lines starting with # are skipped). */
  file?: string;
  /** Keys separated by commas or whitespace (RFDETR_API_KEYS); used when no file is given. */
  env?: string;
}

interface Key {
  digest: Buffer;
  id: string;
}

function digestOf(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

/** Parses keys; a key with control characters or spaces inside is an error naming its line, never its text. */
export function parseKeys(text: string, where: string, separator: RegExp): string[] {
  const keys: string[] = [];
  text.split(separator).forEach((raw, i) => {
    const k = raw.trim();
    if (k === '' || k.startsWith('#')) return;
    // eslint-disable-next-line no-control-regex
    if (/[\s\x00-\x1f\x7f]/.test(k)) throw new Error(`${where}: entry ${i + 1} contains whitespace or control characters: expected one key per entry, printable, without spaces`);
    keys.push(k);
  });
  return keys;
}

export function readKeys(src: ApiKeySource): string[] {
  if (src.file !== undefined) {
    let text: string;
    try {
      text = fs.readFileSync(src.file, 'utf8');
    } catch (e) {
      throw new Error(`--api-key-file ${src.file}: cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): expected a readable file with one API key per line`);
    }
    const keys = parseKeys(text, `--api-key-file ${src.file}`, /\r?\n/);
    if (keys.length === 0) throw new Error(`--api-key-file ${src.file} holds no key: expected one API key per line (an empty file would lock every client out)`);
    return keys;
  }
  return src.env !== undefined ? parseKeys(src.env, 'RFDETR_API_KEYS', /[,\s]+/) : [];
}

export class ApiKeys {
  #keys: Key[] = [];

  constructor(keys: readonly string[] = []) {
    this.set(keys);
  }

  /** Whether keys are required at all. */
  get enabled(): boolean {
    return this.#keys.length > 0;
  }

  get count(): number {
    return this.#keys.length;
  }

  set(keys: readonly string[]): void {
    this.#keys = [...new Set(keys)].map((k) => {
      const digest = digestOf(k);
      return { digest, id: `key:${digest.subarray(0, 4).toString('hex')}` };
    });
  }

  /** The id of the key `presented` is, or null; compares against every key in constant time. */
  match(presented: string): string | null {
    const d = digestOf(presented);
    let found: string | null = null;
    for (const k of this.#keys) if (timingSafeEqual(d, k.digest)) found = k.id;
    return found;
  }
}

/** What presentedKey gives for a request that presents a key in both headers. */
export const TWO_KEYS = Symbol('two API keys');

/**
 * The key a request presents: `Authorization: Bearer KEY` or `X-API-Key: KEY`; TWO_KEYS when it presents one
 * in each. Two keys are refused, not ranked (RFC 6750 section 3.1: more than one method of presenting a token
 * is an invalid_request): a client whose proxy adds one header while it sends the other would otherwise be
 * served under a key it did not mean, and silently. An `Authorization` of another scheme (Basic for a proxy in
 * front) is no key, so it does not clash with `X-API-Key`.
 */
export function presentedKey(req: Request): string | typeof TWO_KEYS | undefined {
  const auth = req.headers.authorization;
  const m = typeof auth === 'string' ? /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(auth) : null;
  const bearer = m ? m[1] : undefined;
  const x = req.headers['x-api-key'];
  const header = typeof x === 'string' && x !== '' ? x : undefined;
  if (bearer !== undefined && header !== undefined) return TWO_KEYS;
  return bearer ?? header;
}

export interface AuthOptions {
  keys: ApiKeys;
  /** /metrics answers without a key. */
  openMetrics?: boolean;
  /** /docs and /openapi.json answer without a key. */
  openDocs?: boolean;
  /**
   * Routes of other servers' APIs whose clients send the key as `api_key` (src/http/compat-*.ts): in the query
   * string (checked here), else in the body (checked by the route once it has read the body: checkBodyKey).
   */
  keyFieldRoutes?: (path: string) => boolean;
  /** Routes that check keys of their own (POST /admin/reload: the admin keys): this middleware lets them through. */
  ownKeyRoutes?: (path: string) => boolean;
  /** Answers an error (the server's error responder). */
  send: (res: Response, err: RfdetrError) => void;
}

function keyMissing(apiKeyField: boolean): RfdetrError {
  return new RfdetrError('E_UNAUTHORIZED', `this server requires an API key: send it as "Authorization: Bearer KEY" or "X-API-Key: KEY"${apiKeyField ? ', or as the api_key field' : ''}`);
}

function keyInvalid(): RfdetrError {
  return new RfdetrError('E_UNAUTHORIZED', 'the API key is not valid on this server: check the key, or ask the operator for one');
}

/**
 * The key a route of keyFieldRoutes found in its body (`api_key`), when the request carried none in a header or
 * the query string: sets res.locals.apiKeyId, or throws E_UNAUTHORIZED (401).
 */
export function checkBodyKey(keys: ApiKeys, res: Response, value: unknown): void {
  if (!keys.enabled || res.locals.apiKeyId !== undefined) return;
  if (typeof value !== 'string' || value === '') throw keyMissing(true);
  const id = keys.match(value);
  if (id === null) throw keyInvalid();
  res.locals.apiKeyId = id;
}

/** Express middleware: sets res.locals.apiKeyId, or answers 401 with WWW-Authenticate. */
export function requireApiKey(o: AuthOptions) {
  const open = new Set<string>([...PROBE_ROUTES, ...(o.openMetrics ? ['/metrics'] : []), ...(o.openDocs ? DOCS_ROUTES : [])]);
  return (req: Request, res: Response, next: NextFunction) => {
    if (!o.keys.enabled || open.has(req.path) || o.ownKeyRoutes?.(req.path) === true) return next();
    const key = presentedKey(req);
    if (key === TWO_KEYS) {
      res.setHeader('WWW-Authenticate', 'Bearer realm="rfdetr", error="invalid_request"');
      return o.send(res, new RfdetrError('E_UNAUTHORIZED', 'the request carries two API keys, "Authorization: Bearer …" and "X-API-Key: …": expected exactly one; send the key in one of the two headers'));
    }
    const field = o.keyFieldRoutes?.(req.path) === true;
    // A client of another server's API sends `api_key` as a query parameter, or in the body (checked there).
    const queried = field && key === undefined ? req.query.api_key : undefined;
    if (field && key === undefined && typeof queried !== 'string') return next();
    const presented = key ?? (queried as string | undefined);
    const id = presented === undefined ? null : o.keys.match(presented);
    if (id !== null) {
      res.locals.apiKeyId = id;
      return next();
    }
    res.setHeader('WWW-Authenticate', `Bearer realm="rfdetr"${presented === undefined ? '' : ', error="invalid_token"'}`);
    o.send(res, presented === undefined ? keyMissing(field) : keyInvalid());
  };
}
