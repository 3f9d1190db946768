// POST /predict/video uploads while they arrive, before a video slot is taken. A slot (--video-max-concurrent)
// is taken only once the upload is complete: taken at the headers, two chunked uploads trickling at 64 KB/s
// held both slots for up to the 300 s upload limit and a real video got 503 in 47 ms (the red team, issue 36).
// What an upload holds instead, each bounded:
//   places   uploads arriving at once: --video-max-uploads over all clients, --video-client-uploads per
//            client (an API key, else an address); more → 503 at once;
//   disk     the bytes of uploads on the server's disk, arriving or complete and not yet removed (a running
//            video's file): --video-disk-limit over all, half of it per client; past it → 503, the upload cut;
//   time     the whole upload within the body timeout (300 s), and never slower than a minimum rate: an
//            upload has `grace` plus one second per `minRate` bytes received (Apache mod_reqtimeout's
//            `body=…,MinRate=…` rule, so a pause made up later costs nothing); past either → 408, the
//            connection closed.
// Time comes from an injected clock, swept once a second while uploads arrive (tests move it by hand).
import { RfdetrError } from '../errors.ts';
import { mib } from './memory-budget.ts';

export interface UploadClock {
  /** Milliseconds, monotonic. */
  now(): number;
  /** Calls `fn` every `ms` until the returned function is called. */
  every(ms: number, fn: () => void): () => void;
}

export const systemClock: UploadClock = {
  now: () => performance.now(),
  every(ms, fn) {
    const t = setInterval(fn, ms);
    t.unref();
    return () => clearInterval(t);
  },
};

/** Why an upload was refused or cut off (the metrics' `reason`). */
export const UPLOAD_REFUSALS = ['places', 'disk', 'too_slow', 'timeout'] as const;
export type UploadRefusal = (typeof UPLOAD_REFUSALS)[number];

export interface UploadLimits {
  /** Uploads arriving at once, over all clients. */
  maxUploads: number;
  /** Of those, one client's. */
  clientUploads: number;
  /** Bytes of uploads on disk (arriving, or complete and not yet removed); one client may hold half. */
  diskLimit: number;
  /** Bytes per second an upload must average after the grace. */
  minRate: number;
  /** Ms an upload may take before the minimum rate applies. */
  graceMs: number;
  /** Ms the whole upload may take. */
  timeoutMs: number;
}

/** A size as the messages give it: MiB, or bytes under one. */
function sizeOf(n: number): string {
  return n >= 2 ** 20 ? mib(n) : `${n} bytes`;
}

/** How often the rates and timeouts are checked. */
const SWEEP_MS = 1000;

export class VideoUploads {
  readonly #arriving = new Set<Upload>();
  readonly #arrivingBy = new Map<string, number>();
  #disk = 0;
  readonly #diskBy = new Map<string, number>();
  #stopSweep: (() => void) | null = null;

  constructor(readonly limits: UploadLimits, readonly clock: UploadClock = systemClock, readonly onRefused: (reason: UploadRefusal) => void = () => {}) {
    for (const [name, v] of Object.entries(limits)) {
      if (!Number.isInteger(v) || v < 1) throw new RangeError(`Expected an integer >= 1 for the video upload limit ${name} but received ${String(v)}`);
    }
    if (limits.clientUploads > limits.maxUploads) throw new RangeError(`Expected --video-client-uploads (${limits.clientUploads}) <= --video-max-uploads (${limits.maxUploads})`);
  }

  /** Uploads arriving now. */
  get arriving(): number {
    return this.#arriving.size;
  }

  /** Bytes of uploads on disk now. */
  get diskBytes(): number {
    return this.#disk;
  }

  /**
   * A place for `client`'s upload, or 503 at once. `fail(err)` is called (once) when the upload is too slow or
   * too late; the caller stops receiving it and answers `err`.
   */
  enter(client: string, fail: (err: RfdetrError) => void): Upload {
    const { maxUploads, clientUploads } = this.limits;
    const mine = this.#arrivingBy.get(client) ?? 0;
    if (mine >= clientUploads) {
      this.onRefused('places');
      throw new RfdetrError('E_QUEUE_FULL', `you already have ${mine} video uploads arriving and one client may have ${clientUploads} (--video-client-uploads): finish or cancel one, then retry`, { client_uploads: clientUploads });
    }
    if (this.#arriving.size >= maxUploads) {
      this.onRefused('places');
      throw new RfdetrError('E_QUEUE_FULL', `${maxUploads} video uploads are arriving (--video-max-uploads): retry after the Retry-After delay`, { max_uploads: maxUploads });
    }
    const u = new Upload(this, client, this.clock.now(), fail);
    this.#arriving.add(u);
    this.#arrivingBy.set(client, mine + 1);
    this.#stopSweep ??= this.clock.every(SWEEP_MS, () => this.sweep());
    return u;
  }

  /** Fails every arriving upload that is past its time (the clock's sweep; tests call it after moving the clock). */
  sweep(): void {
    const now = this.clock.now();
    for (const u of [...this.#arriving]) {
      const late = u.lateness(now);
      if (late) {
        this.onRefused(late.reason);
        u.failWith(late.error);
      }
    }
  }

  /** @internal */
  arrived(u: Upload): void {
    if (!this.#arriving.delete(u)) return;
    const left = (this.#arrivingBy.get(u.client) ?? 1) - 1;
    if (left <= 0) this.#arrivingBy.delete(u.client);
    else this.#arrivingBy.set(u.client, left);
    if (this.#arriving.size === 0 && this.#stopSweep) {
      this.#stopSweep();
      this.#stopSweep = null;
    }
  }

  /** @internal Moves `n` bytes onto (or off, negative) the disk budget; throws 503 when they do not fit. */
  moveDisk(client: string, n: number): void {
    const { diskLimit } = this.limits;
    const mine = (this.#diskBy.get(client) ?? 0) + n;
    const clientLimit = Math.floor(diskLimit / 2);
    if (n > 0 && (this.#disk + n > diskLimit || mine > clientLimit)) {
      this.onRefused('disk');
      const whose = mine > clientLimit ? `one client's share (${sizeOf(clientLimit)}, half of --video-disk-limit)` : `--video-disk-limit (${sizeOf(diskLimit)})`;
      throw new RfdetrError('E_QUEUE_FULL', `video uploads on the server's disk fill ${whose}: retry after the Retry-After delay, or send a smaller video`, { disk_limit: diskLimit });
    }
    this.#disk += n;
    if (mine <= 0) this.#diskBy.delete(client);
    else this.#diskBy.set(client, mine);
  }
}

/** One upload: its place while it arrives, its bytes on disk until its file is removed. */
export class Upload {
  #bytes = 0;
  #arriving = true;
  #failed = false;

  constructor(private readonly uploads: VideoUploads, readonly client: string, readonly startedAt: number, private readonly fail: (err: RfdetrError) => void) {}

  get bytes(): number {
    return this.#bytes;
  }

  /** The upload has `total` bytes now; throws 503 (and counts nothing) when they do not fit on the disk budget. */
  received(total: number): void {
    if (total <= this.#bytes) return;
    this.uploads.moveDisk(this.client, total - this.#bytes);
    this.#bytes = total;
  }

  /** Why the upload is past its time at `now`, or null. */
  lateness(now: number): { reason: 'timeout' | 'too_slow'; error: RfdetrError } | null {
    const { minRate, graceMs, timeoutMs } = this.uploads.limits;
    const elapsed = now - this.startedAt;
    if (elapsed > timeoutMs) {
      return { reason: 'timeout', error: new RfdetrError('E_BODY_TIMEOUT', `the video did not arrive completely within ${timeoutMs} ms (${this.#bytes} bytes received): send it faster or a smaller one (the connection is closed)`, { body_timeout_ms: timeoutMs }) };
    }
    const allowed = graceMs + (this.#bytes / minRate) * 1000;
    if (elapsed > allowed) {
      const rate = Math.round((this.#bytes * 1000) / elapsed);
      return { reason: 'too_slow', error: new RfdetrError('E_BODY_TIMEOUT', `the video is arriving at ${rate} bytes/s (${this.#bytes} bytes in ${Math.round(elapsed / 1000)} s); an upload must average at least ${minRate} bytes/s after its first ${graceMs / 1000} s (--video-min-upload-rate): send it over a faster link or a smaller one (the connection is closed)`, { min_upload_rate: minRate, bytes: this.#bytes }) };
    }
    return null;
  }

  /** @internal */
  failWith(err: RfdetrError): void {
    if (this.#failed || !this.#arriving) return;
    this.#failed = true;
    this.arrived();
    this.fail(err);
  }

  /** The upload is complete (or over): its place is given back; its bytes stay until release(). */
  arrived(): void {
    if (!this.#arriving) return;
    this.#arriving = false;
    this.uploads.arrived(this);
  }

  /** Its file is removed: the place (if still held) and the bytes are given back. Idempotent. */
  release(): void {
    this.arrived();
    if (this.#bytes > 0) this.uploads.moveDisk(this.client, -this.#bytes);
    this.#bytes = 0;
  }
}
