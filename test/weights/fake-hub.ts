// A scripted Hugging Face Hub on 127.0.0.1 for the weights tests: the resolve endpoint
// (/{repo}/resolve/{rev}/{file}, X-Repo-Commit, ETag / X-Linked-Etag, X-Linked-Size, X-Error-Code) on one port and
// a CDN on a second port (LFS files answer 302 to it), with Range support and knobs to cut or corrupt a body.
import http from 'node:http';
import crypto from 'node:crypto';
import type { AddressInfo } from 'node:net';

export interface FakeFile {
  content: Buffer;
  /** LFS files redirect to the CDN and carry X-Linked-Etag = sha256; others are served inline with a git-sha1 ETag. */
  lfs: boolean;
}

export interface RecordedRequest {
  server: 'hub' | 'cdn';
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
}

export function sha256(b: Buffer): string {
  return crypto.createHash('sha256').update(b).digest('hex');
}

export function gitBlobSha1(b: Buffer): string {
  return crypto.createHash('sha1').update(`blob ${b.length}\0`).update(b).digest('hex');
}

export function etagOf(f: FakeFile): string {
  return f.lfs ? sha256(f.content) : gitBlobSha1(f.content);
}

export class FakeHub {
  readonly requests: RecordedRequest[] = [];
  /** repo → branch → commit */
  readonly branches = new Map<string, Map<string, string>>();
  /** repo → commit → file → content */
  readonly commits = new Map<string, Map<string, Map<string, FakeFile>>>();
  /** Cut the CDN body after this many bytes, once (then reset to null). */
  cutCdnOnceAfter: number | null = null;
  /** Serve bodies with one byte flipped (both CDN and inline). */
  corrupt = false;
  /** Ignore Range requests (answer 200 with the whole body). */
  ignoreRange = false;
  /** Renamed repos: old id → new id (answered with a relative 307, as the Hub does). */
  readonly renames = new Map<string, string>();
  /** Answer every resolve request with this status (e.g. 503). */
  hubStatus: number | null = null;
  /** Report this X-Repo-Commit instead of the real one (a misbehaving mirror). */
  commitOverride: string | null = null;
  /** Send this X-Linked-Etag instead of the content's sha256 (a hostile or broken server). */
  linkedEtagOverride: string | null = null;
  /** CDN answers carry Connection: close: the whole body is written and the socket ended (FIN) at once. */
  cdnCloses = false;
  private hub!: http.Server;
  private cdn!: http.Server;
  hubUrl = '';
  cdnUrl = '';

  addCommit(repo: string, commit: string, files: Record<string, FakeFile>, branch?: string): void {
    if (!this.commits.has(repo)) this.commits.set(repo, new Map());
    this.commits.get(repo)!.set(commit, new Map(Object.entries(files)));
    if (branch) {
      if (!this.branches.has(repo)) this.branches.set(repo, new Map());
      this.branches.get(repo)!.set(branch, commit);
    }
  }

  async start(): Promise<this> {
    this.hub = http.createServer((req, res) => this.onHub(req, res));
    this.cdn = http.createServer((req, res) => this.onCdn(req, res));
    await new Promise<void>((r) => this.hub.listen(0, '127.0.0.1', r));
    await new Promise<void>((r) => this.cdn.listen(0, '127.0.0.1', r));
    this.hubUrl = `http://127.0.0.1:${(this.hub.address() as AddressInfo).port}`;
    this.cdnUrl = `http://127.0.0.1:${(this.cdn.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    for (const s of [this.hub, this.cdn]) {
      s.closeAllConnections();
      await new Promise<void>((r) => s.close(() => r()));
    }
  }

  count(server?: 'hub' | 'cdn'): number {
    return this.requests.filter((r) => server === undefined || r.server === server).length;
  }

  private findBlob(etag: string): FakeFile | undefined {
    for (const byCommit of this.commits.values()) {
      for (const files of byCommit.values()) {
        for (const f of files.values()) if (f.lfs && sha256(f.content) === etag) return f;
      }
    }
    return undefined;
  }

  private body(f: FakeFile): Buffer {
    if (!this.corrupt) return f.content;
    const b = Buffer.from(f.content);
    const i = b.length >> 1;
    b[i] = b[i]! ^ 0xff;
    return b;
  }

  private hubGate: Promise<void> | null = null;
  private cdnGate: Promise<void> | null = null;

  /** A hanging Hub: requests from now on get no answer until the returned function is called (or close()). */
  holdHub(): () => void {
    return this.hold('hubGate');
  }

  /** The CDN answers nothing from now on until the returned function is called. */
  holdCdn(): () => void {
    return this.hold('cdnGate');
  }

  private hold(which: 'hubGate' | 'cdnGate'): () => void {
    let open!: () => void;
    this[which] = new Promise<void>((r) => (open = r));
    return () => {
      this[which] = null;
      open();
    };
  }

  private onHub(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.requests.push({ server: 'hub', method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    if (this.hubGate) {
      void this.hubGate.then(() => res.destroyed || this.answerHub(req, res));
      return;
    }
    this.answerHub(req, res);
  }

  private answerHub(req: http.IncomingMessage, res: http.ServerResponse): void {
    const m = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(req.url ?? '');
    if (!m) {
      res.writeHead(404).end();
      return;
    }
    if (this.hubStatus !== null) {
      res.writeHead(this.hubStatus).end();
      return;
    }
    const repo = m[1]!;
    const renamed = this.renames.get(repo);
    if (renamed) {
      res.writeHead(307, { location: (req.url ?? '').replace(`/${repo}/`, `/${renamed}/`) }).end();
      return;
    }
    const rev = decodeURIComponent(m[2]!);
    const file = m[3]!.split('/').map(decodeURIComponent).join('/');
    const byCommit = this.commits.get(repo);
    if (!byCommit) {
      res.writeHead(401, { 'x-error-code': 'RepoNotFound', 'x-error-message': 'Repository not found' }).end();
      return;
    }
    const found = this.branches.get(repo)?.get(rev) ?? (byCommit.has(rev) ? rev : undefined);
    if (!found) {
      res.writeHead(404, { 'x-error-code': 'RevisionNotFound', 'x-error-message': `Invalid rev id: ${rev}` }).end();
      return;
    }
    const commit = this.commitOverride ?? found;
    const f = byCommit.get(found)!.get(file);
    if (!f) {
      res.writeHead(404, { 'x-error-code': 'EntryNotFound', 'x-repo-commit': commit }).end();
      return;
    }
    if (f.lfs) {
      // The real Hub's ETag on the redirect is the pointer file's; X-Linked-Etag is the content's sha256.
      const sha = sha256(f.content);
      res.writeHead(302, {
        location: `${this.cdnUrl}/lfs/${sha}?signed=1`,
        'x-repo-commit': commit,
        etag: `"${gitBlobSha1(Buffer.from(`pointer ${sha}`))}"`,
        'x-linked-etag': `"${this.linkedEtagOverride ?? sha}"`,
        'x-linked-size': String(f.content.length),
      }).end();
      return;
    }
    const body = this.body(f);
    res.writeHead(200, { 'x-repo-commit': commit, etag: `"${gitBlobSha1(f.content)}"`, 'content-length': String(body.length), 'content-type': 'application/json' });
    res.end(req.method === 'HEAD' ? undefined : body);
  }

  private onCdn(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.requests.push({ server: 'cdn', method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    const m = /^\/lfs\/([0-9a-f]{64})/.exec(req.url ?? '');
    const f = m ? this.findBlob(m[1]!) : undefined;
    if (!f) {
      res.writeHead(404).end();
      return;
    }
    if (this.cdnGate) {
      void this.cdnGate.then(() => res.destroyed || this.serveCdn(req, res, f));
      return;
    }
    this.serveCdn(req, res, f);
  }

  private closing(): Record<string, string> {
    return this.cdnCloses ? { connection: 'close' } : {};
  }

  private serveCdn(req: http.IncomingMessage, res: http.ServerResponse, f: FakeFile): void {
    const body = this.body(f);
    const r = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    let start = 0;
    if (r && !this.ignoreRange) {
      start = Number(r[1]);
      if (start >= body.length) {
        res.writeHead(416, { 'content-range': `bytes */${body.length}` }).end();
        return;
      }
      res.writeHead(206, { 'content-range': `bytes ${start}-${body.length - 1}/${body.length}`, 'content-length': String(body.length - start), ...this.closing() });
    } else {
      res.writeHead(200, { 'content-length': String(body.length), ...this.closing() });
    }
    const part = body.subarray(start);
    if (this.cutCdnOnceAfter !== null && part.length > this.cutCdnOnceAfter) {
      const n = this.cutCdnOnceAfter;
      this.cutCdnOnceAfter = null;
      // The bytes, then FIN: TCP delivers all n before the end, so the client has exactly n when the body stops.
      res.write(part.subarray(0, n), () => res.socket?.end());
      return;
    }
    res.end(part);
  }
}

/** A URL on 127.0.0.1 where nothing listens (a port just released). */
export async function deadEndpoint(): Promise<string> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}`;
}
