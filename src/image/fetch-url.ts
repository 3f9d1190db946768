// Image bytes from an http(s) URL, for /predict's image_url (off unless the server names hosts) and the CLI's
// `detect http://…`. The guards an image fetch on a server needs: only the allowed hosts; redirects only to
// the same host; no private, loopback or link-local address unless the operator named that address (an IP
// literal or "localhost" in the allow list) — checked on the address the socket connects to, so a name
// that resolves elsewhere later (DNS rebinding) is caught too; a size cap counted while the body arrives;
// one time limit over all of it. An allowed host is a port too: a bare host only its scheme's default port
// (80, 443), `host:port` exactly that port, so naming a host does not open its other services (a server's own
// /metrics) to probing. A URL is never echoed at length: messages carry at most its first 96 characters.
import dns from 'node:dns';
import net from 'node:net';
import { Agent, request, type Dispatcher } from 'undici';
import { RfdetrError } from '../errors.ts';
import { parseAllowedHost, type AllowedHost } from './allowed-host.ts';
import { MAX_IMAGE_URL_LENGTH } from './limits.ts';

export { parseAllowedHost, type AllowedHost };

export const DEFAULT_URL_TIMEOUT_MS = 10_000;
const MAX_REDIRECTS = 3;

// Not the public internet: RFC 6890 special-purpose ranges a server-side fetch must not reach by accident.
const NOT_PUBLIC = new net.BlockList();
for (const [a, p] of [['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4]] as const) NOT_PUBLIC.addSubnet(a, p, 'ipv4');
for (const [a, p] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['64:ff9b::', 96]] as const) NOT_PUBLIC.addSubnet(a, p, 'ipv6');

/** Whether `ip` is a public (globally routable) address; IPv4-mapped IPv6 is judged as its IPv4. */
export function isPublicAddress(ip: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return !NOT_PUBLIC.check(mapped[1]!, 'ipv4');
  const family = net.isIP(ip);
  if (family === 0) return false;
  return !NOT_PUBLIC.check(ip, family === 4 ? 'ipv4' : 'ipv6');
}

export interface UrlFetcherOptions {
  /**
   * Hosts allowed (case-insensitive): `host` (ports 80 and 443 only) or `host:port` (`[v6]:port`). Undefined:
   * any host, any port, any address (the CLI: the user typed the URL).
   */
  allowHosts?: readonly string[];
  /** Bytes the body may have. */
  maxBytes: number;
  /** The whole fetch, redirects included. */
  timeoutMs?: number;
}

/** `onBytes(n)` is called as each chunk arrives (a memory budget); what it throws ends the fetch. */
export type UrlFetcher = (url: string, signal?: AbortSignal, onBytes?: (n: number) => void) => Promise<Buffer>;

/** `url` as messages show it: at most 96 characters, JSON-quoted. */
export function shownUrl(url: string): string {
  return url.length <= 96 ? JSON.stringify(url) : `${JSON.stringify(url.slice(0, 96))}… (${url.length} characters)`;
}

const forbidden = (message: string) => new RfdetrError('E_URL_NOT_ALLOWED', message);
const failed = (url: string, why: string) => new RfdetrError('E_URL_FETCH', `image_url ${shownUrl(url)} could not be fetched: ${why}`);

function effectivePort(u: URL): number {
  return u.port !== '' ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
}

/** The host names an allow list lets reach a non-public address: the ones written as IP literals or "localhost". */
function explicitAddresses(hosts: readonly AllowedHost[]): Set<string> {
  return new Set(hosts.map((h) => h.host).filter((h) => net.isIP(h) !== 0 || h === 'localhost'));
}

export function createUrlFetcher(o: UrlFetcherOptions): UrlFetcher {
  const allowed = o.allowHosts?.map(parseAllowedHost);
  const allow = allowed ? new Set(allowed.map((a) => a.host)) : undefined;
  const explicit = allowed ? explicitAddresses(allowed) : undefined;
  const shownAllow = allowed?.map((a) => (a.port === null ? a.host : `${a.host.includes(':') ? `[${a.host}]` : a.host}:${a.port}`)).join(', ');
  const timeoutMs = o.timeoutMs ?? DEFAULT_URL_TIMEOUT_MS;

  // Every connection's addresses are checked as the socket resolves them: the address connected to is the one
  // judged, whatever a resolver said a moment before.
  const lookup: net.LookupFunction = (hostname, options, cb) => {
    dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return cb(err, '', 4);
      const list = addresses as dns.LookupAddress[];
      const open = explicit?.has(hostname.toLowerCase()) ? list : list.filter((a) => isPublicAddress(a.address));
      if (open.length === 0) {
        return cb(Object.assign(new Error(`${hostname} resolves to ${list.map((a) => a.address).join(', ')}, not a public address`), { code: 'E_URL_PRIVATE' }), '', 4);
      }
      if ((options as dns.LookupOptions).all) (cb as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, open);
      else cb(null, open[0]!.address, open[0]!.family);
    });
  };
  const dispatcher: Dispatcher = new Agent(allow ? { connect: { lookup } } : {});

  function check(u: URL, original: string): void {
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw forbidden(`Expected an http:// or https:// URL for image_url but received ${shownUrl(original)}`);
    if (u.username || u.password) throw forbidden(`image_url ${shownUrl(original)} carries credentials: expected a URL without user:password@`);
    if (!allowed) return;
    const host = u.hostname.toLowerCase().replace(/^\[|\]$/g, '');
    const port = effectivePort(u);
    const ok = allowed.some((a) => a.host === host && (a.port === null ? port === 80 || port === 443 : a.port === port));
    if (!ok) {
      const why = allow!.has(host) ? `port ${port} of ${JSON.stringify(host.slice(0, 64))} is not allowed` : `host ${JSON.stringify(host.slice(0, 64))} is not allowed`;
      throw forbidden(`image_url ${why}: this server fetches only from ${shownAllow} (--allow-url-host; a bare host means ports 80 and 443)`);
    }
    if (net.isIP(host) !== 0 && !isPublicAddress(host) && !explicit!.has(host)) throw forbidden(`image_url host ${host} is not a public address`);
  }

  return async function fetchUrl(url: string, signal?: AbortSignal, onBytes?: (n: number) => void): Promise<Buffer> {
    if (url.length > MAX_IMAGE_URL_LENGTH) throw forbidden(`image_url is ${url.length} characters long; the limit is ${MAX_IMAGE_URL_LENGTH}: send the image itself, or a shorter URL`);
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw forbidden(`Expected an absolute http:// or https:// URL for image_url but received ${shownUrl(url)}`);
    }
    check(u, url);
    const host = u.host;
    const timeout = AbortSignal.timeout(timeoutMs);
    const all = signal ? AbortSignal.any([signal, timeout]) : timeout;
    try {
      for (let hop = 0; ; hop++) {
        const res = await request(u, { dispatcher, signal: all, headers: { accept: 'image/*', 'user-agent': 'rfdetr-serve' } });
        // Destroying a body we refuse emits 'error' on it: without a listener that would take the process down.
        res.body.on('error', () => {});
        if (res.statusCode >= 300 && res.statusCode < 400 && res.headers.location !== undefined) {
          res.body.resume();
          const next = new URL(String(res.headers.location), u);
          if (next.host !== host) throw forbidden(`image_url ${shownUrl(url)} redirects to ${JSON.stringify(next.host.slice(0, 64))}, another host: expected a URL on ${host} that answers with the image`);
          if (hop >= MAX_REDIRECTS) throw failed(url, `more than ${MAX_REDIRECTS} redirects`);
          check(next, next.href);
          u = next;
          continue;
        }
        if (res.statusCode !== 200) {
          res.body.resume();
          throw failed(url, `the server answered ${res.statusCode}: expected 200 with the image bytes`);
        }
        const declared = Number(res.headers['content-length']);
        if (Number.isFinite(declared) && declared > o.maxBytes) {
          res.body.destroy();
          throw tooLarge(url, declared, o.maxBytes);
        }
        const chunks: Buffer[] = [];
        let n = 0;
        for await (const c of res.body as AsyncIterable<Buffer>) {
          n += c.length;
          if (n > o.maxBytes) {
            res.body.destroy();
            throw tooLarge(url, n, o.maxBytes);
          }
          try {
            onBytes?.(c.length);
          } catch (e) {
            res.body.destroy();
            throw e;
          }
          chunks.push(c);
        }
        return Buffer.concat(chunks, n);
      }
    } catch (e) {
      if (e instanceof RfdetrError) throw e;
      if (signal?.aborted) throw signal.reason;
      if (timeout.aborted) throw failed(url, `no complete answer within ${timeoutMs} ms`);
      const err = e as NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException };
      if (err.code === 'E_URL_PRIVATE' || err.cause?.code === 'E_URL_PRIVATE') throw forbidden(`image_url ${shownUrl(url)}: ${(err.cause ?? err).message}; name the address itself in --allow-url-host to allow it`);
      throw failed(url, `${err.code ?? err.name}: ${err.message}`);
    }
  };
}

function tooLarge(url: string, bytes: number, max: number): RfdetrError {
  return new RfdetrError('E_IMAGE_TOO_LARGE', `image_url ${shownUrl(url)} is too large: ${bytes} bytes or more; the limit is ${max} bytes (${max / 2 ** 20} MiB)`, { bytes, max_bytes: max });
}
