// A minimal HTTP/1.1 client on one kept-alive socket, for the overhead bench: it times a request from just
// before its bytes are written to the arrival of the response's last byte (by Content-Length), and parses
// the JSON only after that mark, so no client library's work (undici's parser, stream and body mixins,
// JSON.parse) is charged to the server's round trip. Responses without a Content-Length (chunked) are
// refused with an error: the server answers /predict with a length.
import net from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** performance.now() just before the write and when the last body byte had arrived. */
  t0: number;
  t1: number;
}

export class RawClient {
  #sock: net.Socket;
  #chunks: Buffer[] = [];
  #have = 0;
  #pending: { resolve: (r: RawResponse) => void; reject: (e: Error) => void; t0: number } | undefined;
  #headEnd = -1;
  #need = -1;
  #status = 0;
  #headers: Record<string, string> = {};

  #closed = false;

  private constructor(sock: net.Socket, readonly url: URL) {
    this.#sock = sock;
    this.#attach(sock);
  }

  get host(): string {
    return this.url.host;
  }

  #attach(sock: net.Socket) {
    this.#sock = sock;
    this.#closed = false;
    sock.setNoDelay(true);
    sock.on('data', (d: Buffer) => this.#onData(d));
    sock.on('error', (e) => this.#fail(e));
    sock.on('close', () => {
      this.#closed = true;
      this.#fail(new Error('the server closed the kept-alive connection mid-request; expected it to stay open (Connection: keep-alive)'));
    });
  }

  static #open(u: URL): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const s = net.connect(Number(u.port), u.hostname, () => resolve(s));
      s.once('error', reject);
    });
  }

  static async connect(url: string): Promise<RawClient> {
    const u = new URL(url);
    return new RawClient(await RawClient.#open(u), u);
  }

  async request(method: string, path: string, headers: Record<string, string>, body: string | Buffer): Promise<RawResponse> {
    if (this.#pending) throw new Error('RawClient sends one request at a time; await the previous one first');
    // The server closes a connection idle past its keep-alive timeout (5 s) between a bench's blocks: open a
    // new one, outside the timed span.
    if (this.#closed || this.#sock.destroyed) this.#attach(await RawClient.#open(this.url));
    const buf = typeof body === 'string' ? Buffer.from(body) : body;
    let head = `${method} ${path} HTTP/1.1\r\nHost: ${this.host}\r\nConnection: keep-alive\r\nContent-Length: ${buf.length}\r\n`;
    for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
    const msg = Buffer.concat([Buffer.from(head + '\r\n'), buf]);
    return new Promise((resolve, reject) => {
      const t0 = performance.now();
      this.#pending = { resolve, reject, t0 };
      this.#sock.write(msg, (e) => e && this.#fail(e));
    });
  }

  #onData(d: Buffer) {
    this.#chunks.push(d);
    this.#have += d.length;
    if (this.#headEnd < 0) {
      const all = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks);
      this.#chunks = [all];
      const i = all.indexOf('\r\n\r\n');
      if (i < 0) return;
      this.#headEnd = i + 4;
      const lines = all.subarray(0, i).toString('latin1').split('\r\n');
      this.#status = Number(lines[0]!.split(' ')[1]);
      this.#headers = {};
      for (const l of lines.slice(1)) {
        const c = l.indexOf(':');
        this.#headers[l.slice(0, c).trim().toLowerCase()] = l.slice(c + 1).trim();
      }
      const cl = this.#headers['content-length'];
      if (cl === undefined) return this.#fail(new Error(`response ${this.#status} has no Content-Length; RawClient needs one (got headers ${JSON.stringify(this.#headers)})`));
      this.#need = this.#headEnd + Number(cl);
    }
    if (this.#have < this.#need) return;
    const t1 = performance.now();
    const all = this.#chunks.length === 1 ? this.#chunks[0]! : Buffer.concat(this.#chunks);
    if (all.length > this.#need) return this.#fail(new Error(`${all.length - this.#need} bytes past the response's Content-Length; expected none (one request at a time)`));
    const p = this.#pending;
    const res: RawResponse = { status: this.#status, headers: this.#headers, body: all.subarray(this.#headEnd, this.#need), t0: p?.t0 ?? t1, t1 };
    this.#chunks = [];
    this.#have = 0;
    this.#headEnd = -1;
    this.#need = -1;
    this.#pending = undefined;
    p?.resolve(res);
  }

  #fail(e: Error) {
    const p = this.#pending;
    this.#pending = undefined;
    p?.reject(e);
  }

  close(): Promise<void> {
    return new Promise((r) => this.#sock.end(r));
  }
}
