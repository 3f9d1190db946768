// A FIFO concurrency limiter for the decode + preprocess stage: at most `limit` images are being decoded and
// resized at once (they compete for the same cores as the sidecar), the rest wait in order. A waiter whose
// signal aborts leaves the line without ever taking a slot.
export class Limiter {
  private active = 0;
  private readonly waiters: Array<{ grant: () => void; fail: (e: Error) => void }> = [];

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`Expected an integer >= 1 for limit but received ${limit}`);
  }

  get running(): number {
    return this.active;
  }

  get waiting(): number {
    return this.waiters.length;
  }

  /** Resolves with a release function once a slot is free; rejects with `abortError()` if `signal` aborts first. */
  acquire(signal: AbortSignal, abortError: () => Error): Promise<() => void> {
    if (signal.aborted) return Promise.reject(abortError());
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.active--;
      const next = this.waiters.shift();
      if (next) next.grant();
    };
    if (this.active < this.limit) {
      this.active++;
      return Promise.resolve(release);
    }
    return new Promise((resolve, reject) => {
      const entry = {
        grant: () => {
          signal.removeEventListener('abort', onAbort);
          this.active++;
          resolve(release);
        },
        fail: reject,
      };
      const onAbort = () => {
        const i = this.waiters.indexOf(entry);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(abortError());
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(entry);
    });
  }
}
