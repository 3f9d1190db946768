// A weighted semaphore shared by clients: at most `limit` units are held at once (images being decoded, bytes of
// decoded pixels in memory); the rest wait. Waiters are served fairly across clients: the next grant goes to the
// waiting client that holds the least now (ties: the one served longest ago, then whose head has waited
// longest), and within one client in arrival order: with one slot, clients take turns. So one client's backlog cannot keep another's first request waiting behind all of it. A client
// holds at most `clientLimit` units, except that a client holding nothing may always take one request (so one
// maximal image still passes). The line never lets a later request overtake the one picked next (a large
// request is not starved by a stream of small ones): when the pick does not fit, everyone waits. A request for
// more than the whole limit is granted when nothing else is held. A waiter whose signal aborts leaves the line
// without ever holding anything.
export interface LimiterOptions {
  /** Units one client may hold at once (default: the whole limit). */
  clientLimit?: number;
  /** Units held elsewhere that count against the same limit (a budget shared with another kind of holder). */
  heldElsewhere?: () => number;
}

interface Waiter {
  units: number;
  client: string;
  seq: number;
  grant: () => void;
}

export const ANONYMOUS = '';

export class Limiter {
  private held = 0;
  private readonly heldBy = new Map<string, number>();
  private readonly lines = new Map<string, Waiter[]>();
  private waiters = 0;
  private seq = 0;
  private grants = 0;
  private readonly lastServed = new Map<string, number>();
  readonly clientLimit: number;
  private readonly heldElsewhere: () => number;

  constructor(readonly limit: number, opts: LimiterOptions = {}) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`Expected an integer >= 1 for limit but received ${limit}`);
    this.clientLimit = opts.clientLimit ?? limit;
    if (!Number.isInteger(this.clientLimit) || this.clientLimit < 1) throw new RangeError(`Expected an integer >= 1 for clientLimit but received ${this.clientLimit}`);
    this.heldElsewhere = opts.heldElsewhere ?? (() => 0);
  }

  /** Units held now. */
  get running(): number {
    return this.held;
  }

  get waiting(): number {
    return this.waiters;
  }

  /** Units `client` holds now. */
  heldByClient(client: string): number {
    return this.heldBy.get(client) ?? 0;
  }

  /**
   * Resolves with a release function once `units` are granted to `client`; rejects with `abortError()` if
   * `signal` aborts first.
   */
  acquire(signal: AbortSignal, abortError: () => Error, units = 1, client = ANONYMOUS): Promise<() => void> {
    if (signal.aborted) return Promise.reject(abortError());
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.take(client, -units);
      this.pump();
    };
    // Nobody waiting and room now: the grant pump() would make at once, without the line entry and the abort
    // listener (an uncontended request takes two of these on its way to the engine).
    if (this.waiters === 0 && this.clientFits(client, units) && this.fits(units)) {
      this.take(client, units);
      return Promise.resolve(release);
    }
    return new Promise((resolve, reject) => {
      const entry: Waiter = {
        units,
        client,
        seq: this.seq++,
        grant: () => {
          signal.removeEventListener('abort', onAbort);
          this.take(client, units);
          resolve(release);
        },
      };
      const onAbort = () => {
        const line = this.lines.get(client);
        const i = line ? line.indexOf(entry) : -1;
        if (i >= 0) {
          line!.splice(i, 1);
          this.waiters--;
          if (line!.length === 0) this.lines.delete(client);
        }
        reject(abortError());
        this.pump();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      let line = this.lines.get(client);
      if (!line) this.lines.set(client, (line = []));
      line.push(entry);
      this.waiters++;
      this.pump();
    });
  }

  /**
   * Counts `units` that are already in memory (an encoded response waiting to be written) without waiting:
   * they may take the total past the limit, and later acquires wait until they are released.
   */
  force(units: number, client = ANONYMOUS): () => void {
    this.take(client, units);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.take(client, -units);
      this.pump();
    };
  }

  /** Grants what fits now; call it when units held elsewhere were released. */
  pump(): void {
    for (;;) {
      const next = this.pick();
      if (!next || !this.fits(next.units)) return;
      const line = this.lines.get(next.client)!;
      line.shift();
      this.waiters--;
      if (line.length === 0) this.lines.delete(next.client);
      next.grant();
    }
  }

  private take(client: string, units: number): void {
    if (units > 0) {
      this.lastServed.set(client, ++this.grants);
      // Turn order only matters among clients seen recently: forget idle ones before the map grows without bound.
      if (this.lastServed.size > 4096) for (const c of this.lastServed.keys()) if (!this.heldBy.has(c) && !this.lines.has(c)) this.lastServed.delete(c);
    }
    this.held += units;
    const n = (this.heldBy.get(client) ?? 0) + units;
    if (n === 0) this.heldBy.delete(client);
    else this.heldBy.set(client, n);
  }

  /** The head of the waiting client that holds the least (ties: served longest ago, then waiting longest); clients at their share are passed over. */
  private pick(): Waiter | undefined {
    let best: Waiter | undefined;
    let key: [number, number, number] = [Infinity, Infinity, Infinity];
    for (const [client, line] of this.lines) {
      const head = line[0]!;
      if (!this.clientFits(client, head.units)) continue;
      const k: [number, number, number] = [this.heldByClient(client), this.lastServed.get(client) ?? 0, head.seq];
      if (k[0] < key[0] || (k[0] === key[0] && (k[1] < key[1] || (k[1] === key[1] && k[2] < key[2])))) {
        best = head;
        key = k;
      }
    }
    return best;
  }

  private clientFits(client: string, units: number): boolean {
    const h = this.heldByClient(client);
    return h === 0 || h + units <= this.clientLimit;
  }

  private fits(units: number): boolean {
    const total = this.held + this.heldElsewhere();
    return total === 0 || (this.held === 0 && units > this.limit) || total + units <= this.limit;
  }
}
