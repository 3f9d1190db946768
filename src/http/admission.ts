// What a /predict request may hold on its way to the engine, and for how long. Each stage has its own
// budget, so a crowd stuck in one stage cannot lock out the others:
//   bodies   request bodies being received: a count (cheap, large), the bytes received and not yet decoded
//            (a global byte budget), and a body-read timeout much shorter than the forward deadline (→ 408);
//   decode   images being decoded at once (they compete for the cores), FIFO;
//   pixels   bytes of decoded RGB in memory, reserved from the image header before a pixel is decoded and
//            held until the sidecar has answered (a tiny PNG declaring 8192×8192 reserves its 201 MB);
//   engine   decoded images waiting for the engine: at most `queueSize` (→ 503 with Retry-After).
// Admission to the engine queue happens only after the body is complete and decoded.
import { RfdetrError } from '../errors.ts';
import { Limiter } from './limiter.ts';

export interface AdmissionLimits {
  /** Decoded images waiting for the engine; more → 503 E_QUEUE_FULL. */
  queueSize: number;
  /** Request bodies being received at once; more → 503 E_QUEUE_FULL. */
  maxBodies: number;
  /** Bytes of request bodies received and not yet decoded, summed over requests; more → 503 E_QUEUE_FULL. */
  bodyBytesBudget: number;
  /** A body must arrive completely within this many ms of the request's start → else 408 E_BODY_TIMEOUT. */
  bodyTimeoutMs: number;
  /** Images decoded at once. */
  decodeConcurrency: number;
  /** Bytes of decoded pixels in memory at once, summed over requests. */
  pixelBudgetBytes: number;
}

export const DEFAULT_LIMITS = {
  queueSize: 16,
  maxBodies: 256,
  bodyBytesBudget: 512 * 1024 * 1024,
  bodyTimeoutMs: 30_000,
  pixelBudgetBytes: 768 * 1024 * 1024,
} as const;

/** The bytes one request's body holds while it is received and until its image is decoded. */
export class BodyBytes {
  #held = 0;
  constructor(private readonly budget: BodyBudget) {}

  add(n: number): void {
    this.#held += n;
    this.budget.add(n);
  }

  /** Over the shared budget: this request should be refused. */
  get over(): boolean {
    return this.budget.total > this.budget.limit;
  }

  release(): void {
    this.budget.add(-this.#held);
    this.#held = 0;
  }
}

class BodyBudget {
  total = 0;
  constructor(readonly limit: number) {}
  add(n: number): void {
    this.total += n;
  }
}

export class Admission {
  readonly limits: AdmissionLimits;
  #bodies = 0;
  readonly #bodyBytes: BodyBudget;
  readonly decodes: Limiter;
  readonly pixels: Limiter;

  constructor(limits: AdmissionLimits) {
    for (const [name, v] of Object.entries(limits)) {
      if (!Number.isInteger(v) || v < 1) throw new RangeError(`Expected an integer >= 1 for ${name} but received ${String(v)}`);
    }
    this.limits = limits;
    this.#bodyBytes = new BodyBudget(limits.bodyBytesBudget);
    this.decodes = new Limiter(limits.decodeConcurrency);
    this.pixels = new Limiter(limits.pixelBudgetBytes);
  }

  get bodiesInFlight(): number {
    return this.#bodies;
  }

  get bodyBytesInFlight(): number {
    return this.#bodyBytes.total;
  }

  /** Takes a body slot at once or throws 503: a body slot is never waited for (the client holds a connection). */
  enterBody(): { bytes: BodyBytes; leave: () => void } {
    if (this.#bodies >= this.limits.maxBodies) {
      throw new RfdetrError('E_QUEUE_FULL', `too many request bodies are being received (${this.limits.maxBodies}): retry after the Retry-After delay`, { max_bodies: this.limits.maxBodies });
    }
    if (this.#bodyBytes.total >= this.limits.bodyBytesBudget) throw this.bodyBytesFull();
    this.#bodies++;
    let left = false;
    return {
      bytes: new BodyBytes(this.#bodyBytes),
      leave: () => {
        if (left) return;
        left = true;
        this.#bodies--;
      },
    };
  }

  bodyBytesFull(): RfdetrError {
    return new RfdetrError('E_QUEUE_FULL',
      `the server holds ${this.limits.bodyBytesBudget} bytes of request bodies not yet decoded: retry after the Retry-After delay`,
      { body_bytes_budget: this.limits.bodyBytesBudget });
  }

  /** Throws 503 when the engine queue is full; the caller then hands the request to the engine queue. */
  checkEngineQueue(depth: number): void {
    if (depth >= this.limits.queueSize) {
      throw new RfdetrError('E_QUEUE_FULL', `the request queue is full (${this.limits.queueSize} decoded images waiting for the engine, --queue-size): retry after the Retry-After delay`, { queue_size: this.limits.queueSize });
    }
  }
}
