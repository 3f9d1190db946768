// The parts of an InferenceBackend every test double shares: a settable state that notifies its listeners,
// the restart count, the failure reason, the real transport (src/sidecar/transport.ts) over decodes() and
// frameTarget(), which a subclass may override, and headOutputs(): a scripted head's outputs as the sidecar
// would send them under this double's hello (a segment model's mask rows as the request's select picks them).
// Subclasses script infer(), close() and destroy().
import type { BackendState, InferenceBackend, InferInput, InferOptions, InferResult, SidecarInfo } from '../../src/sidecar/backend.ts';
import { selectRows } from './row-select.ts';
import type { FrameTarget } from '../../src/image/frame-decode.ts';
import { prepareFrame, type FrameData, type Prepared, type TransportBudget } from '../../src/sidecar/transport.ts';

/** What a scripted forward computes: logits and boxes, and for a segment model each query's M×M mask logits. */
export interface ScriptedHead {
  logits: Float32Array;
  predBoxes: Float32Array;
  maskOf?: (query: number) => Float32Array;
}

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

  /**
   * `head` as an infer result's outputs: logits and pred_boxes, and for each selected output of the hello (a
   * segment model's pred_masks) the rows of the queries `opts.select` picks by the sidecar's rule (none without
   * a select), filled by head.maskOf.
   */
  headOutputs(head: ScriptedHead, opts: InferOptions = {}): Pick<InferResult, 'outputs' | 'rows'> {
    const outputs: Record<string, Float32Array> = { logits: head.logits, pred_boxes: head.predBoxes };
    const selected = this.info?.outputs.filter((o) => o.rows === 'selected') ?? [];
    if (!selected.length) return { outputs };
    const { numQueries, numClasses } = this.info!;
    const queries = opts.select ? selectRows(head.logits, numQueries, numClasses, opts.select) : [];
    const rows: Record<string, Uint32Array> = {};
    for (const o of selected) {
      const size = o.shape.slice(1).reduce((n, d) => n * d, 1);
      const values = new Float32Array(queries.length * size);
      queries.forEach((q, r) => {
        if (!head.maskOf) throw new Error(`scripted backend: the hello declares the selected output ${o.name} but the head has no maskOf`);
        values.set(head.maskOf(q).subarray(0, size), r * size);
      });
      outputs[o.name] = values;
      rows[o.name] = Uint32Array.from(queries);
    }
    return { outputs, rows };
  }

  abstract infer(input: InferInput, opts?: InferOptions): Promise<InferResult>;
  abstract close(): Promise<void>;
  abstract destroy(err?: Error): void;
}
