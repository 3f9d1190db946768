// One full garbage collection when the server goes quiet after traffic. The buffers a burst of requests held
// (bodies, decoded pixels, frames) go back to the system only once V8 collects the objects that own them, and V8
// collects when JavaScript allocates: an idle server allocates nothing, so it kept them. Under the red-team attack
// (bench/redteam) the server's RSS 60 s after the attack was 702-772 MB in six of thirteen runs; with a collection
// every 10 s, 214 MB (bench/README.md, "The server's main thread yields to the engine").
import v8 from 'node:v8';
import vm from 'node:vm';

export interface IdleCollectorOptions {
  /** A count that grows with every request the server takes (answered or refused). */
  activity: () => number;
  /** True while a request or a forward is in progress. */
  busy: () => boolean;
  /** The collection (exposedGc()'s function). */
  collect: () => void;
}

/**
 * check() collects once after traffic, when no request came since the previous check and nothing is in
 * progress; never twice without traffic in between, never while busy.
 */
export class IdleCollector {
  readonly #o: IdleCollectorOptions;
  #seen: number;
  #dirty = false;
  collections = 0;

  constructor(o: IdleCollectorOptions) {
    this.#o = o;
    this.#seen = o.activity();
  }

  /** Returns true when it collected. */
  check(): boolean {
    const now = this.#o.activity();
    if (now !== this.#seen) {
      this.#seen = now;
      this.#dirty = true;
      return false;
    }
    if (!this.#dirty || this.#o.busy()) return false;
    this.#dirty = false;
    this.#o.collect();
    this.collections++;
    return true;
  }

  /** Checks every `quietMs` (an unref'd timer: it never keeps the process alive); returns the stop function. */
  start(quietMs: number): () => void {
    const timer = setInterval(() => this.check(), quietMs);
    timer.unref();
    return () => clearInterval(timer);
  }
}

/**
 * V8's full collection as a function, without starting node with --expose-gc: the flag set at run time makes
 * `gc` a global of contexts created afterwards. An Error when this V8 refuses.
 */
export function exposedGc(): (() => void) | Error {
  try {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as unknown;
    return typeof gc === 'function' ? (gc as () => void) : new Error('V8 did not expose gc() after --expose-gc was set');
  } catch (e) {
    return e as Error;
  }
}
