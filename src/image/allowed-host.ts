// One --allow-url-host entry, parsed: a host (ports 80 and 443 only) or host:port (that port only). No
// dependencies beyond node:net, so `rfdetr serve --help` can check the flag without loading the fetcher.
import net from 'node:net';

/** One --allow-url-host entry: the host (lower case, IPv6 without brackets) and its port, or null for 80/443. */
export interface AllowedHost {
  host: string;
  port: number | null;
}

/** Parses `host`, `host:port`, `[v6]` or `[v6]:port`; a bare IPv6 literal has no port. Throws a message on anything else. */
export function parseAllowedHost(v: string): AllowedHost {
  const s = v.trim().toLowerCase();
  let host = s;
  let port: string | undefined;
  const bracket = /^\[([0-9a-f:.]+)\](?::(\d+))?$/.exec(s);
  if (bracket) {
    host = bracket[1]!;
    port = bracket[2];
  } else if (net.isIP(s) === 6) {
    host = s;
  } else {
    const m = /^([^:]+)(?::(\d+))?$/.exec(s);
    if (!m) throw new Error(`expected HOST or HOST:PORT (e.g. images.example.com, 127.0.0.1:8080, [::1]:8080; no scheme or path) but received ${JSON.stringify(v)}`);
    host = m[1]!;
    port = m[2];
  }
  if (net.isIP(host) === 0 && !/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/.test(host)) {
    throw new Error(`expected a host name or IP address (e.g. images.example.com or 127.0.0.1, optionally :PORT; no scheme or path) but received ${JSON.stringify(v)}`);
  }
  const n = port === undefined ? null : Number(port);
  if (n !== null && !(Number.isInteger(n) && n >= 1 && n <= 65535)) throw new Error(`expected a port from 1 to 65535 in ${JSON.stringify(v)}`);
  return { host, port: n };
}
