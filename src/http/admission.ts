// What a /predict request may hold on its way to the engine, and for how long:
//   bodies   request bodies being received: a count (cheap, large) and a body-read timeout much shorter than
//            the forward deadline (→ 408);
//   memory   one budget (memory-budget.ts) for the undecoded bytes, the decoded pixels and the annotated
//            output, reserved before each piece of work starts;
//   queue    every image of a request counts in the queue from the moment the request is admitted (its body
//            complete) until its forward starts: at most `queueSize` in all and `clientShare` per client; a
//            request that does not fit is refused at once (→ 503 with Retry-After), never parked;
//   decode   images being decoded at once (they compete for the cores), served fairly across clients.
// A client is an API key when keys are on, else a remote address (client-id.ts).
import { RfdetrError } from '../errors.ts';
import { Limiter } from './limiter.ts';
import { DEFAULT_MEMORY_LIMIT, MemoryBudget, type UndecodedBytes } from './memory-budget.ts';

export interface AdmissionLimits {
  /** Images admitted and not yet on the engine, over all clients; more → 503 E_QUEUE_FULL. */
  queueSize: number;
  /** Of those, what one client may hold. */
  clientShare: number;
  /** Request bodies being received at once; more → 503 E_QUEUE_FULL. */
  maxBodies: number;
  /** A body must arrive completely within this many ms of the request's start → else 408 E_BODY_TIMEOUT. */
  bodyTimeoutMs: number;
  /** Images decoded at once. */
  decodeConcurrency: number;
  /** Bytes every request together may hold (--memory-limit). */
  memoryLimit: number;
}

export const DEFAULT_LIMITS = {
  queueSize: 32,
  maxBodies: 256,
  bodyTimeoutMs: 30_000,
  memoryLimit: DEFAULT_MEMORY_LIMIT,
} as const;

/** One client's share of a queue of `queueSize`: half, so one client's backlog always leaves room for another. */
export function clientShareOf(queueSize: number): number {
  return Math.max(1, Math.ceil(queueSize / 2));
}

/** The places one admitted request holds in the queue: one per image, each given back once (its forward started, or it failed before). */
export class QueuePlaces {
  /** `leave[i]()` gives image i's place back; calling it again does nothing. */
  readonly leave: Array<() => void>;
  constructor(admission: Admission, client: string, n: number) {
    this.leave = Array.from({ length: n }, () => {
      let left = false;
      return () => {
        if (left) return;
        left = true;
        admission.giveBack(client, 1);
      };
    });
  }

  leaveAll(): void {
    for (const l of this.leave) l();
  }
}

export class Admission {
  readonly limits: AdmissionLimits;
  #bodies = 0;
  #queued = 0;
  readonly #queuedBy = new Map<string, number>();
  readonly decodes: Limiter;
  readonly memory: MemoryBudget;

  constructor(limits: AdmissionLimits) {
    for (const [name, v] of Object.entries(limits)) {
      if (!Number.isInteger(v) || v < 1) throw new RangeError(`Expected an integer >= 1 for ${name} but received ${String(v)}`);
    }
    this.limits = limits;
    // One decode slot is kept out of any one client's reach, so a client whose images take seconds to decode
    // cannot hold every slot while another's small image waits.
    this.decodes = new Limiter(limits.decodeConcurrency, { clientLimit: Math.max(1, limits.decodeConcurrency - 1) });
    this.memory = new MemoryBudget(limits.memoryLimit);
  }

  get bodiesInFlight(): number {
    return this.#bodies;
  }

  /** Images admitted and not yet on the engine. */
  get queued(): number {
    return this.#queued;
  }

  queuedBy(client: string): number {
    return this.#queuedBy.get(client) ?? 0;
  }

  /** Takes a body slot at once or throws 503: a body slot is never waited for (the client holds a connection). */
  enterBody(client: string): { bytes: UndecodedBytes; leave: () => void } {
    if (this.#bodies >= this.limits.maxBodies) {
      throw new RfdetrError('E_QUEUE_FULL', `too many request bodies are being received (${this.limits.maxBodies}): retry after the Retry-After delay`, { max_bodies: this.limits.maxBodies });
    }
    this.#bodies++;
    let left = false;
    return {
      bytes: this.memory.undecodedFor(client),
      leave: () => {
        if (left) return;
        left = true;
        this.#bodies--;
      },
    };
  }

  /**
   * Admits a request's `n` images into the queue, or throws 503 at once: all of them fit beside the images
   * already queued (over all clients, and this client's share), or none is admitted.
   */
  admit(client: string, n: number): QueuePlaces {
    this.check(client, n);
    const mine = this.queuedBy(client);
    this.#queued += n;
    this.#queuedBy.set(client, mine + n);
    return new QueuePlaces(this, client, n);
  }

  /**
   * Throws the 503 for a client whose whole share of the queue is taken: no request of its (each brings at least
   * one image) can be admitted now, so its body is not worth reading.
   */
  checkShare(client: string): void {
    if (this.queuedBy(client) >= this.limits.clientShare) this.check(client, 1);
  }

  /** Throws the 503 admit() would throw for `n` images now; takes nothing. */
  check(client: string, n: number): void {
    const { queueSize, clientShare } = this.limits;
    const mine = this.queuedBy(client);
    if (n > clientShare) {
      throw new RfdetrError('E_QUEUE_FULL', `this request's ${n} images are more than one client may have queued (${clientShare}, half of --queue-size ${queueSize}): send at most ${clientShare} images per request, or raise --queue-size`, { queue_size: queueSize, client_share: clientShare });
    }
    if (mine + n > clientShare) {
      throw new RfdetrError('E_QUEUE_FULL', `you already have ${mine} images queued and one client may have ${clientShare} (half of --queue-size ${queueSize}): retry after the Retry-After delay, or send fewer concurrent requests`, { queue_size: queueSize, client_share: clientShare });
    }
    if (this.#queued + n > queueSize) {
      throw new RfdetrError('E_QUEUE_FULL', `the request queue cannot take this request's ${n} image${n === 1 ? '' : 's'} (${this.#queued} of ${queueSize} places taken, --queue-size): retry after the Retry-After delay`, { queue_size: queueSize });
    }
  }

  /** @internal */
  giveBack(client: string, n: number): void {
    this.#queued -= n;
    const left = this.queuedBy(client) - n;
    if (left <= 0) this.#queuedBy.delete(client);
    else this.#queuedBy.set(client, left);
  }
}
