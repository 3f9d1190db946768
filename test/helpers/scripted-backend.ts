// The parts of an InferenceBackend every test double shares: a settable state that notifies its listeners,
// the restart count, the failure reason, and the real transport (src/sidecar/transport.ts) over decodes() and
// frameTarget(), which a subclass may override. Subclasses script infer(), close() and destroy().
import type { BackendState, InferenceBackend, InferInput, InferOptions, InferResult, SidecarInfo } from '../../src/sidecar/backend.ts';
import type { FrameTarget } from '../../src/image/frame-decode.ts';
import { prepareFrame, type FrameData, type Prepared, type TransportBudget } from '../../src/sidecar/transport.ts';

export abstract class ScriptedBackend implements InferenceBackend {
  #state: BackendState = 'ready';
  #listeners = new Set<(s: BackendState, prev: BackendState) => void>();
  abstract info: SidecarInfo | null;
  restarts = 0;
  failureReason: string | null = null;

  get state(): BackendState {
    return this.#state;
  }

  set state(next: BackendState) {
    const prev = this.#state;
    this.#state = next;
    if (prev !== next) for (const l of this.#listeners) l(next, prev);
  }

  /** Moves to `next` with `reason` as the failure reason and tells the listeners (tests drive failures with this). */
  setState(next: BackendState, reason: string | null = null): void {
    this.failureReason = reason;
    this.state = next;
  }

  onStateChange(listener: (s: BackendState, prev: BackendState) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The transport every backend has, over this double's decodes() and frameTarget(). */
  prepare(frame: FrameData, budget?: TransportBudget): Promise<Prepared> {
    return prepareFrame(this, frame, budget);
  }

  /** Image files it decodes itself (sent as `{ encoded }`): none unless a subclass says so. */
  decodes(_format: 'jpeg' | 'png'): boolean {
    return false;
  }

  /** Shared-memory slots it lends: none. */
  frameTarget(_bytes: number): FrameTarget | undefined {
    return undefined;
  }

  abstract infer(input: InferInput, opts?: InferOptions): Promise<InferResult>;
  abstract close(): Promise<void>;
  abstract destroy(err?: Error): void;
}
