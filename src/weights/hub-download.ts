// Downloads files from the Hugging Face Hub into the shared cache the way huggingface_hub's hf_hub_download does:
//   1. HEAD {endpoint}/{repo}/resolve/{revision}/{file}, redirects NOT followed. The answer (200, or a 302 to the
//      CDN for LFS files) carries X-Repo-Commit (the commit the revision resolved to), X-Linked-Etag / ETag (sha256
//      of an LFS file, git blob sha1 otherwise) and X-Linked-Size / Content-Length. A relative redirect (a renamed
//      repo) is followed; an absolute one is where the bytes live.
//   2. GET that location into blobs/<etag>.incomplete (Range: bytes=N- resumes a partial file), check size and
//      hash, then rename to blobs/<etag> and link snapshots/<commit>/<file> → ../../blobs/<etag>.
// HF_TOKEN goes only to URLs on the endpoint's origin, never to a CDN on another host (the Hub's signed CDN
// URLs need no token, and a bearer token must not leak to third parties).
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { EnvHttpProxyAgent, request, type Dispatcher } from 'undici';
import { RfdetrError } from '../errors.ts';
import { ProgressBar, type ProgressStream } from '../progress.ts';
import { acquireLock } from './download-lock.ts';
import { isCommitSha, isFile, linkSnapshot } from './hub-cache.ts';

const USER_AGENT = 'rfdetr-serve/0.1.0 (weights; +huggingface_hub cache layout)';
const MAX_REDIRECTS = 5;
/** Attempts per file when the body is cut mid-way (each resumes with Range from what arrived). */
const MAX_BODY_ATTEMPTS = 4;

export type { ProgressStream } from '../progress.ts';

export interface HubClientOptions {
  /** e.g. https://huggingface.co (HF_ENDPOINT); no trailing slash needed. */
  endpoint: string;
  /** HF_TOKEN; sent as a bearer token to the endpoint's origin only. */
  token?: string | undefined;
  log: (line: string) => void;
  /** Where the progress bar goes; drawn only when `isTTY` is true. */
  progress?: ProgressStream | null | undefined;
  /**
   * Connect, response-headers and body-idle timeout in ms for every request. Unset: HF_HUB_ETAG_TIMEOUT (HEAD) and
   * HF_HUB_DOWNLOAD_TIMEOUT (GET), in seconds, as huggingface_hub reads them; 10 s each by default.
   */
  timeoutMs?: number | undefined;
  /** Proxy variables (HTTPS_PROXY, HTTP_PROXY, NO_PROXY) come from here. */
  env?: NodeJS.ProcessEnv | undefined;
  signal?: AbortSignal | undefined;
}

export interface HubFileMetadata {
  repo: string;
  revision: string;
  file: string;
  /** The resolve URL asked. */
  url: string;
  /** Where the bytes are (the CDN URL of a redirect, else the resolve URL). */
  location: string;
  commit: string;
  etag: string;
  size: number | null;
}

/** What a HEAD or GET failure means for the caller: only `unreachable` lets resolution fall back to the cache. */
export type HubFailure = 'unreachable' | 'not_found' | 'auth' | 'bad_response' | 'corrupt';

function hubError(kind: HubFailure, message: string, details: Record<string, unknown>, cause?: unknown): RfdetrError {
  return new RfdetrError('E_HUB', message, { ...details, hubFailure: kind }, cause === undefined ? undefined : { cause });
}

export function hubFailureOf(e: unknown): HubFailure | null {
  if (e instanceof RfdetrError && e.code === 'E_HUB') return (e.details?.hubFailure as HubFailure | undefined) ?? null;
  return null;
}

export function resolveUrl(endpoint: string, repo: string, revision: string, file: string): string {
  const base = endpoint.replace(/\/+$/, '');
  return `${base}/${repo}/resolve/${encodeURIComponent(revision)}/${file.split('/').map(encodeURIComponent).join('/')}`;
}

function header(h: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
}

/** `"abc"` / `W/"abc"` → `abc` (the form used as the blob file name). */
export function normalizeEtag(etag: string | undefined): string | undefined {
  if (etag === undefined) return undefined;
  return etag.trim().replace(/^W\//, '').replace(/^"|"$/g, '');
}

function intOrNull(v: string | undefined): number | null {
  if (v === undefined || !/^\d+$/.test(v.trim())) return null;
  return Number(v.trim());
}

function describeNetworkError(e: unknown): string {
  const err = e as { code?: string; message?: string; cause?: { code?: string; message?: string } };
  const code = err.code ?? err.cause?.code;
  const msg = err.message ?? String(e);
  return code && !msg.includes(code) ? `${code}: ${msg}` : msg;
}

/** A client for one resolution: owns its connection pool, closed by `close()`. */
export class HubClient {
  readonly endpoint: string;
  private readonly origin: string;
  private readonly dispatcher: Dispatcher;
  private readonly headTimeoutMs: number;
  private readonly getTimeoutMs: number;
  /** Every request made (method and URL), for logs and tests. */
  readonly requests: string[] = [];

  constructor(private readonly opts: HubClientOptions) {
    this.endpoint = opts.endpoint.replace(/\/+$/, '');
    let u: URL;
    try {
      u = new URL(this.endpoint);
    } catch {
      throw new RfdetrError('E_USAGE', `Expected an http(s) URL for HF_ENDPOINT but received ${JSON.stringify(opts.endpoint)}`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') {
      throw new RfdetrError('E_USAGE', `Expected an http(s) URL for HF_ENDPOINT but received ${JSON.stringify(opts.endpoint)}`);
    }
    this.origin = u.origin;
    const env = opts.env ?? process.env;
    this.headTimeoutMs = opts.timeoutMs ?? secondsFromEnv(env, 'HF_HUB_ETAG_TIMEOUT');
    this.getTimeoutMs = opts.timeoutMs ?? secondsFromEnv(env, 'HF_HUB_DOWNLOAD_TIMEOUT');
    const t = Math.max(this.headTimeoutMs, this.getTimeoutMs);
    this.dispatcher = new EnvHttpProxyAgent({
      httpProxy: env.HTTP_PROXY ?? env.http_proxy ?? '',
      httpsProxy: env.HTTPS_PROXY ?? env.https_proxy ?? '',
      noProxy: env.NO_PROXY ?? env.no_proxy ?? '',
      connect: { timeout: t },
      headersTimeout: t,
      bodyTimeout: t,
      keepAliveTimeout: 1_000,
    });
  }

  async close(): Promise<void> {
    await this.dispatcher.destroy();
  }

  private headersFor(url: string, extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { 'user-agent': USER_AGENT, ...extra };
    if (this.opts.token && new URL(url).origin === this.origin) h.authorization = `Bearer ${this.opts.token}`;
    return h;
  }

  private async send(method: 'HEAD' | 'GET', url: string, extra?: Record<string, string>): Promise<Dispatcher.ResponseData> {
    this.requests.push(`${method} ${url}`);
    try {
      return await request(url, {
        method,
        headers: this.headersFor(url, extra),
        dispatcher: this.dispatcher,
        headersTimeout: method === 'HEAD' ? this.headTimeoutMs : this.getTimeoutMs,
        bodyTimeout: method === 'HEAD' ? this.headTimeoutMs : this.getTimeoutMs,
        signal: this.opts.signal ?? null,
      });
    } catch (e) {
      if (this.opts.signal?.aborted) throw e;
      throw hubError('unreachable', `the Hub is unreachable: ${method} ${url} failed (${describeNetworkError(e)}${this.timeoutNote(e, method)})`, { url }, e);
    }
  }

  /** For undici's header/body timeouts: the limit that ended the wait and what sets it. */
  private timeoutNote(e: unknown, method: 'HEAD' | 'GET'): string {
    const err = e as { code?: string; cause?: { code?: string } };
    const code = err.code ?? err.cause?.code;
    if (code !== 'UND_ERR_HEADERS_TIMEOUT' && code !== 'UND_ERR_BODY_TIMEOUT') return '';
    const ms = method === 'HEAD' ? this.headTimeoutMs : this.getTimeoutMs;
    const by = this.opts.timeoutMs !== undefined ? 'the timeout option' : method === 'HEAD' ? 'HF_HUB_ETAG_TIMEOUT' : 'HF_HUB_DOWNLOAD_TIMEOUT';
    return `; no answer within ${ms / 1000} s (${by}), raise it for a slow network`;
  }

  private statusError(method: string, url: string, status: number, h: Record<string, string | string[] | undefined>, repo: string, revision: string, file: string): RfdetrError {
    const code = header(h, 'x-error-code');
    const hubMsg = header(h, 'x-error-message');
    const said = `${method} ${url} → HTTP ${status}${code ? ` ${code}` : ''}${hubMsg ? ` (${hubMsg})` : ''}`;
    const details = { url, status, errorCode: code };
    if (code === 'RevisionNotFound') {
      return hubError('not_found', `revision '${revision}' not found in repo '${repo}': ${said}. Expected a commit sha or branch of ${repo}; check --revision / TT_WEIGHTS_REVISION`, details);
    }
    if (code === 'EntryNotFound') {
      return hubError('not_found', `file '${file}' not found in '${repo}' at revision '${revision}': ${said}. Expected ${repo} to contain ${file}; check --model`, details);
    }
    if (code === 'RepoNotFound' || code === 'GatedRepo' || status === 401 || status === 403) {
      return hubError('auth', `repo '${repo}' not found or not accessible: ${said}. Check --model / HF_MODEL; for a private or gated repo set HF_TOKEN`, details);
    }
    if (status === 404) {
      return hubError('not_found', `not found on the Hub: ${said}. Expected repo '${repo}' with '${file}' at revision '${revision}'; check --model and --revision`, details);
    }
    if (status >= 500 || status === 429) {
      return hubError('unreachable', `the Hub is unavailable: ${said}`, details);
    }
    return hubError('bad_response', `unexpected answer from the Hub: ${said}`, details);
  }

  /** HEAD the resolve URL (redirects to other hosts are not followed) and read the file's commit, etag and size. */
  async metadata(repo: string, revision: string, file: string): Promise<HubFileMetadata> {
    const url = resolveUrl(this.endpoint, repo, revision, file);
    let current = url;
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      // identity: a compressed HEAD would report the compressed Content-Length, not the file's size.
      const res = await this.send('HEAD', current, { 'accept-encoding': 'identity' });
      await res.body.dump();
      const h = res.headers;
      let location = current;
      if (res.statusCode >= 300 && res.statusCode < 400) {
        const loc = header(h, 'location');
        if (!loc) throw hubError('bad_response', `HEAD ${current} → HTTP ${res.statusCode} without a Location header`, { url: current });
        if (/^[a-z][a-z0-9+.-]*:/i.test(loc) || loc.startsWith('//')) {
          location = new URL(loc, current).href;
        } else {
          // A relative redirect: the repo was renamed; ask again at the new path on the same host.
          current = new URL(loc, current).href;
          continue;
        }
      } else if (res.statusCode < 200 || res.statusCode >= 300) {
        throw this.statusError('HEAD', current, res.statusCode, h, repo, revision, file);
      }
      const commit = header(h, 'x-repo-commit')?.trim();
      const etag = normalizeEtag(header(h, 'x-linked-etag') ?? header(h, 'etag'));
      const size = intOrNull(header(h, 'x-linked-size') ?? header(h, 'content-length'));
      if (!commit || !isCommitSha(commit)) {
        throw hubError('bad_response', `HEAD ${current} → HTTP ${res.statusCode} without a valid X-Repo-Commit header (got ${JSON.stringify(commit)}); is HF_ENDPOINT a Hugging Face Hub?`, { url: current });
      }
      // The etag becomes a file name under blobs/: no separators, no leading dot.
      if (!etag || !/^[\w-][\w.-]*$/.test(etag)) {
        throw hubError('bad_response', `HEAD ${current} → HTTP ${res.statusCode} without a usable ETag/X-Linked-Etag (got ${JSON.stringify(etag)}); cannot pin the file's content`, { url: current });
      }
      return { repo, revision, file, url, location, commit, etag, size };
    }
    throw hubError('bad_response', `HEAD ${url}: more than ${MAX_REDIRECTS} redirects`, { url });
  }

  /**
   * Makes `blobs/<etag>` exist with verified content (downloading into `<blob>.incomplete`, resuming what is
   * there) and links `snapshots/<commit>/<file>` to it. Returns the snapshot path.
   */
  async fetchFile(repoDir: string, meta: HubFileMetadata, file: string): Promise<string> {
    const blob = path.join(repoDir, 'blobs', meta.etag);
    if (!isFile(blob)) {
      fs.mkdirSync(path.dirname(blob), { recursive: true });
      const lock = await acquireLock(path.join(path.dirname(repoDir), '.locks', path.basename(repoDir), `${meta.etag}.rfdetr.lock`), this.opts.log);
      try {
        if (!isFile(blob)) await this.download(blob, meta, file);
      } finally {
        lock.release();
      }
    } else {
      this.opts.log(`weights: ${file}: blob ${meta.etag} already in the cache`);
    }
    return linkSnapshot(repoDir, meta.commit, file, meta.etag);
  }

  private async download(blob: string, meta: HubFileMetadata, file: string): Promise<void> {
    const incomplete = `${blob}.incomplete`;
    for (let attempt = 1; attempt <= MAX_BODY_ATTEMPTS; attempt++) {
      let have = fileSize(incomplete);
      if (meta.size !== null && have > meta.size) {
        this.opts.log(`weights: ${file}: ${incomplete} is ${have} bytes, more than the expected ${meta.size}; starting over`);
        fs.rmSync(incomplete, { force: true });
        have = 0;
      }
      if (meta.size !== null && have === meta.size) break;
      try {
        await this.getInto(incomplete, have, meta, file);
        break;
      } catch (e) {
        const now = fileSize(incomplete);
        // Retry only when the connection broke after bytes arrived (a cut body); other failures are final here.
        if (hubFailureOf(e) !== 'unreachable' || now <= have || attempt === MAX_BODY_ATTEMPTS) throw e;
        this.opts.log(`weights: ${file}: transfer interrupted at ${now} bytes (${(e as Error).message}); resuming`);
      }
    }
    const got = fileSize(incomplete);
    if (meta.size !== null && got !== meta.size) {
      fs.rmSync(incomplete, { force: true });
      throw hubError('corrupt', `${file}: downloaded ${got} bytes from ${meta.location} but the Hub said ${meta.size}; the partial file was removed, run the command again`, { url: meta.location });
    }
    const check = await checkEtag(incomplete, meta.etag);
    if (check.kind === 'none') {
      // The Hub's etags are sha256 (LFS) or git sha1 (plain git); anything else cannot be checked here.
      this.opts.log(`weights: ${file}: etag ${meta.etag} is neither a sha256 nor a git sha1; content not hash-checked (size ${got} matches)`);
    } else if (!check.ok) {
      fs.rmSync(incomplete, { force: true });
      throw hubError('corrupt', `${file}: content from ${meta.location} has ${check.kind} ${check.actual} but the Hub's etag is ${meta.etag}; the download was discarded (nothing kept in blobs/), run the command again`, { url: meta.location, expected: meta.etag, actual: check.actual });
    } else {
      this.opts.log(`weights: ${file}: ${check.kind} verified (${meta.etag})`);
    }
    fs.renameSync(incomplete, blob);
  }

  private async getInto(incomplete: string, have: number, meta: HubFileMetadata, file: string): Promise<void> {
    let url = meta.location;
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      const extra: Record<string, string> = { 'accept-encoding': 'identity' };
      if (have > 0) extra.range = `bytes=${have}-`;
      let bar: ProgressBar | undefined;
      let skip: (() => void) | undefined;
      const res = await this.getToFile(url, extra, (status, h) => {
        if (status === 416 && have > 0) {
          skip = () => {
            this.opts.log(`weights: ${file}: server refused to resume at byte ${have} (HTTP 416); starting over`);
            fs.rmSync(incomplete, { force: true });
            have = 0;
          };
          return null;
        }
        if (status !== 200 && status !== 206) return null;
        let append = false;
        if (status === 206) {
          const m = /^bytes (\d+)-/.exec(header(h, 'content-range') ?? '');
          if (!m || Number(m[1]) !== have) return null;
          append = true;
          this.opts.log(`weights: ${file}: resuming at byte ${have}`);
        } else if (have > 0) {
          this.opts.log(`weights: ${file}: server ignored the Range request; downloading from the start`);
        }
        this.opts.log(`weights: ${file}: downloading ${meta.size ?? '?'} bytes from ${url}`);
        bar = new ProgressBar(this.opts.progress, { unit: 'bytes', label: file, total: meta.size, done: append ? have : 0 });
        return { path: incomplete, append, onBytes: (n) => bar!.advance(n) };
      });
      bar?.finish();
      const { statusCode, headers: h } = res;
      if (res.diskError) {
        throw new RfdetrError('E_HUB', `cannot write ${incomplete}: ${res.diskError.message}; free space in the Hub cache or point HF_HUB_CACHE elsewhere`, { path: incomplete }, { cause: res.diskError });
      }
      if (res.written === null) {
        // Not a body we keep: a redirect, a refused resume or an error status (its body was discarded unread).
        if (res.error !== null && statusCode === 0) {
          if (this.opts.signal?.aborted) throw res.error;
          throw hubError('unreachable', `the Hub is unreachable: GET ${url} failed (${describeNetworkError(res.error)}${this.timeoutNote(res.error, 'GET')})`, { url }, res.error);
        }
        if (statusCode >= 300 && statusCode < 400) {
          const loc = header(h, 'location');
          if (!loc) throw hubError('bad_response', `GET ${url} → HTTP ${statusCode} without a Location header`, { url });
          url = new URL(loc, url).href;
          continue;
        }
        if (skip) {
          skip();
          continue;
        }
        if (statusCode === 206) {
          throw hubError('bad_response', `GET ${url} with Range bytes=${have}- → HTTP 206 with Content-Range ${JSON.stringify(header(h, 'content-range'))}`, { url });
        }
        throw this.statusError('GET', url, statusCode, h, meta.repo, meta.revision, file);
      }
      if (res.error !== null) {
        if (this.opts.signal?.aborted) throw res.error;
        throw hubError('unreachable', `the transfer of ${file} from ${url} broke off (${describeNetworkError(res.error)}${this.timeoutNote(res.error, 'GET')})`, { url }, res.error);
      }
      return;
    }
    throw hubError('bad_response', `GET ${meta.location}: more than ${MAX_REDIRECTS} redirects`, { url: meta.location });
  }

  /**
   * One GET whose body goes from undici's parser callback straight into a file with a synchronous write, never
   * through a stream. The parser pauses only when a handler asks it to (and request()'s body stream asks
   * whenever its 64 KiB buffer is full); a parser paused when the peer's FIN arrives throws an uncatchable
   * AssertionError in undici 7 (nodejs/undici#5360: 8 of 30 8 MB downloads with Connection: close on this
   * machine). This handler never pauses, so that state cannot occur; the blocking write is the backpressure
   * (the socket is not read while it runs, so TCP flow control slows the sender) and nothing is buffered here.
   * `decide` sees the status and headers and returns where the body goes, or null to discard it.
   * Resolves (never rejects) with what happened: `error` is the transport error, if any, after the body began.
   */
  private getToFile(url: string, extra: Record<string, string>,
    decide: (status: number, headers: Record<string, string | string[] | undefined>) => BodyTarget | null): Promise<GetOutcome> {
    this.requests.push(`GET ${url}`);
    const u = new URL(url);
    return new Promise<GetOutcome>((resolve) => {
      const out: GetOutcome = { statusCode: 0, headers: {}, written: null, error: null, diskError: null };
      let fd: number | null = null;
      let target: BodyTarget | null = null;
      let controller: Dispatcher.DispatchController | undefined;
      const signal = this.opts.signal;
      const onAbort = () => controller?.abort(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
      let settled = false;
      const finish = (error: Error | null) => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener('abort', onAbort);
        if (fd !== null) {
          try {
            fs.closeSync(fd);
          } catch (e) {
            out.diskError ??= e as Error;
          }
        }
        if (error !== null && out.diskError === null) out.error = error;
        resolve(out);
      };
      if (signal?.aborted) {
        out.error = signal.reason instanceof Error ? signal.reason : new Error('aborted');
        resolve(out);
        return;
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart: (c) => {
          controller = c;
        },
        onResponseStart: (c, statusCode, headers) => {
          out.statusCode = statusCode;
          out.headers = headers;
          target = decide(statusCode, headers);
          if (target === null) return;
          try {
            fd = fs.openSync(target.path, target.append ? 'a' : 'w');
            out.written = 0;
          } catch (e) {
            out.diskError = e as Error;
            target = null;
            c.abort(e as Error);
          }
        },
        onResponseData: (c, chunk) => {
          if (target === null || fd === null) return;
          try {
            for (let off = 0; off < chunk.length;) off += fs.writeSync(fd, chunk, off, chunk.length - off);
          } catch (e) {
            out.diskError = e as Error;
            target = null;
            c.abort(e as Error);
            return;
          }
          out.written! += chunk.length;
          target.onBytes(chunk.length);
        },
        onResponseEnd: () => finish(null),
        onResponseError: (_c, err) => finish(err),
      };
      try {
        this.dispatcher.dispatch({
          origin: u.origin, path: `${u.pathname}${u.search}`, method: 'GET', headers: this.headersFor(url, extra),
          headersTimeout: this.getTimeoutMs, bodyTimeout: this.getTimeoutMs,
        }, handler);
      } catch (e) {
        finish(e as Error);
      }
    });
  }
}

interface BodyTarget {
  path: string;
  append: boolean;
  onBytes: (n: number) => void;
}

interface GetOutcome {
  /** 0 when no response arrived. */
  statusCode: number;
  headers: Record<string, string | string[] | undefined>;
  /** Bytes written to the target; null when the body was not kept. */
  written: number | null;
  /** The transport error (connection refused, cut body, timeout, abort), if any. */
  error: Error | null;
  /** Opening, writing or closing the target failed. */
  diskError: Error | null;
}

function secondsFromEnv(env: NodeJS.ProcessEnv, name: string): number {
  const v = env[name];
  if (v === undefined || v === '') return 10_000;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new RfdetrError('E_USAGE', `Expected a positive number of seconds for ${name} but received ${JSON.stringify(v)}`);
  return Math.round(n * 1000);
}

function fileSize(p: string): number {
  try {
    return fs.statSync(p).size;
  } catch {
    return 0;
  }
}

export interface EtagCheck {
  /** sha256 for a 64-hex etag (LFS), git-sha1 for a 40-hex etag (a plain git blob), none otherwise. */
  kind: 'sha256' | 'git-sha1' | 'none';
  ok: boolean;
  actual: string;
}

/** Hashes `file` the way its Hub etag was computed: sha256 of the bytes (LFS) or sha1("blob <len>\0" + bytes) (git). */
export async function checkEtag(file: string, etag: string): Promise<EtagCheck> {
  const e = etag.toLowerCase();
  let kind: EtagCheck['kind'];
  let hash: crypto.Hash;
  if (/^[0-9a-f]{64}$/.test(e)) {
    kind = 'sha256';
    hash = crypto.createHash('sha256');
  } else if (/^[0-9a-f]{40}$/.test(e)) {
    kind = 'git-sha1';
    hash = crypto.createHash('sha1');
    hash.update(`blob ${fs.statSync(file).size}\0`);
  } else {
    return { kind: 'none', ok: false, actual: '' };
  }
  await pipeline(fs.createReadStream(file), hash);
  const actual = hash.digest('hex');
  return { kind, ok: actual === e, actual };
}
