// A FIFO weighted semaphore: at most `limit` units are held at once (request bodies being received, bytes of
// decoded pixels in memory, images being decoded); the rest wait in arrival order, and a later small request
// never overtakes an earlier large one (no starvation). A request for more than the whole limit is granted
// when nothing else is held, so one maximal image still passes. A waiter whose signal aborts leaves the line
// without ever holding anything.
export class Limiter {
  private held = 0;
  private readonly waiters: Array<{ units: number; grant: () => void }> = [];

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`Expected an integer >= 1 for limit but received ${limit}`);
  }

  /** Units held now. */
  get running(): number {
    return this.held;
  }

  get waiting(): number {
    return this.waiters.length;
  }

  /** True when `units` could be granted at once (nothing waits ahead and it fits). */
  wouldGrant(units = 1): boolean {
    return this.waiters.length === 0 && this.fits(units);
  }

  /** Resolves with a release function once `units` are free; rejects with `abortError()` if `signal` aborts first. */
  acquire(signal: AbortSignal, abortError: () => Error, units = 1): Promise<() => void> {
    if (signal.aborted) return Promise.reject(abortError());
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.held -= units;
      this.pump();
    };
    if (this.wouldGrant(units)) {
      this.held += units;
      return Promise.resolve(release);
    }
    return new Promise((resolve, reject) => {
      const entry = {
        units,
        grant: () => {
          signal.removeEventListener('abort', onAbort);
          this.held += units;
          resolve(release);
        },
      };
      const onAbort = () => {
        const i = this.waiters.indexOf(entry);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(abortError());
        this.pump();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(entry);
    });
  }

  private fits(units: number): boolean {
    return this.held === 0 || this.held + units <= this.limit;
  }

  private pump(): void {
    while (this.waiters.length > 0 && this.fits(this.waiters[0]!.units)) this.waiters.shift()!.grant();
  }
}
