// The models one server serves, each a lane: its own backend (a sidecar or a pool of them), engine state and
// engine queue, behind the server's one admission, memory budget and decode slots. A request picks its lane once
// (its `model`, else the first) and keeps it to its answer, so a swap never moves a request between checkpoints:
// put() switches new requests to a ready replacement, then drains the old lane (its requests answered) and
// closes its backend; remove() answers the id's new requests 404 and drains the same way.
import { RfdetrError } from '../errors.ts';
import type { BackendState, InferenceBackend } from '../sidecar/backend.ts';
import type { EngineQueue } from './engine-queue.ts';
import type { EngineState } from './engine-state.ts';
import type { ModelIdentity } from './model-identity.ts';
import type { WeightsInfo } from './probes.ts';

/** One model as the server is given it. */
export interface ModelSpec {
  /** Its id (serve --weights ID=DIR, --models); absent: the variant's id (Roboflow/rf-detr-base, rf-detr-nano, …). */
  id?: string;
  backend: InferenceBackend;
  /** The loaded variant's name and id; a function is asked per request (an external sidecar's hello). */
  model?: ModelIdentity | (() => ModelIdentity);
  weights?: WeightsInfo;
  /** Extra /info fields of this model (engine, precision, the models-file entry). */
  params?: Record<string, unknown>;
  /** Requests handed to its sidecar(s) at once (default the server's engineConcurrency). */
  engineConcurrency?: number;
}

export interface ModelLane {
  /** The id requests name it by (and /v1/models lists). */
  readonly id: string;
  /** The other name it answers to: its variant's lower-case name when the id is the variant's, else the id. */
  alias(): string;
  identity(): ModelIdentity;
  readonly backend: InferenceBackend;
  readonly engineState: EngineState;
  readonly engine: EngineQueue;
  readonly weights: WeightsInfo | undefined;
  readonly params: Record<string, unknown>;
  labels(): readonly string[];
  /** A request runs on this lane from now to the returned call (a drain waits for them). */
  enter(): () => void;
  /** Requests between enter() and its call. */
  readonly users: number;
  /** Resolves once no request is on the lane. */
  idle(): Promise<void>;
}

/** What laneOf makes a lane of. */
export interface LaneParts {
  /** The id it was given; absent: its variant's id, asked at every call (an external sidecar's hello). */
  fixedId: string | undefined;
  identity: () => ModelIdentity;
  backend: InferenceBackend;
  engineState: EngineState;
  engine: EngineQueue;
  weights: WeightsInfo | undefined;
  params: Record<string, unknown>;
  labels: () => readonly string[];
}

/** A lane of its parts, with its request count (enter/users/idle). */
export function laneOf(p: LaneParts): ModelLane {
  let users = 0;
  const waiters: Array<() => void> = [];
  return {
    get id() {
      return p.fixedId ?? p.identity().id;
    },
    alias: () => (p.fixedId ?? p.identity().name.toLowerCase()),
    identity: p.identity,
    backend: p.backend,
    engineState: p.engineState,
    engine: p.engine,
    weights: p.weights,
    params: p.params,
    labels: p.labels,
    enter() {
      users++;
      let left = false;
      return () => {
        if (left) return;
        left = true;
        if (--users === 0) for (const w of waiters.splice(0)) w();
      };
    },
    get users() {
      return users;
    },
    idle() {
      return users === 0 ? Promise.resolve() : new Promise<void>((r) => waiters.push(r));
    },
  };
}

/** Makes a lane of a spec (the server's: it owns the metrics and the queue policy). */
export type LaneFactory = (spec: ModelSpec, primary: boolean) => ModelLane;

function notServed(name: string, served: readonly ModelLane[]): RfdetrError {
  const names = served.map((m) => (m.alias() === m.id ? m.id : `${m.id} (or ${m.alias()})`)).join(', ');
  return new RfdetrError('E_MODEL_NOT_FOUND', `model ${JSON.stringify(name)} is not served here: this server serves ${names || 'no model'}; ask GET /v1/models for the list and use one of those ids`, { models: served.map((m) => m.id) });
}

export class ModelLanes {
  readonly #lanes: ModelLane[] = [];
  readonly #retiring = new Set<ModelLane>();
  readonly #listeners = new Set<() => void>();

  constructor(private readonly make: LaneFactory, specs: readonly ModelSpec[], readonly minReady: number) {
    if (specs.length === 0) throw new RangeError('Expected at least one model for the server but received none');
    for (const s of specs) this.#add(this.make(s, this.#lanes.length === 0));
    if (!Number.isInteger(minReady) || minReady < 1 || minReady > specs.length) {
      throw new RangeError(`Expected minReady between 1 and ${specs.length} (the models served) but received ${String(minReady)}`);
    }
  }

  /** The models served, in order (the first is the default). */
  list(): readonly ModelLane[] {
    return this.#lanes;
  }

  /** Every lane with a backend still to drain: the served ones and those being retired. */
  all(): ModelLane[] {
    return [...this.#lanes, ...this.#retiring];
  }

  get default(): ModelLane {
    return this.#lanes[0]!;
  }

  /** The lane `name` names (its id or alias); absent or empty: the first. Unknown: 404 naming the served ids. */
  resolve(name?: string): ModelLane {
    if (name === undefined || name === '') return this.default;
    const found = this.#lanes.find((m) => m.id === name) ?? this.#lanes.find((m) => m.alias() === name);
    if (!found) throw notServed(name, this.#lanes);
    return found;
  }

  /** Lanes whose backend is ready. */
  readyCount(): number {
    return this.#lanes.filter((l) => l.engineState.state === 'ready').length;
  }

  /** Lanes that can still become ready (not failed or stopped). */
  liveCount(): number {
    return this.#lanes.filter((l) => l.engineState.state !== 'failed' && l.engineState.state !== 'stopped').length;
  }

  /** Calls `fn` on every lane's state change and on every swap. */
  onChange(fn: () => void): void {
    this.#listeners.add(fn);
  }

  /**
   * Serves `spec` under its id (the given one, else its variant's): a new id is added at the end; a served id is replaced once the new backend is
   * ready (it never serves an unready replacement), then the old lane drains and closes. A backend that fails
   * (or stops) before it is ready is destroyed and the old lane keeps serving: the error names the id. Resolves
   * with the times of the two steps (ms from the call).
   */
  async put(spec: ModelSpec, ready: (b: InferenceBackend) => Promise<void>): Promise<{ id: string; outcome: 'added' | 'swapped'; readyMs: number; drainedMs: number }> {
    const t0 = performance.now();
    try {
      await ready(spec.backend);
    } catch (e) {
      spec.backend.destroy(e as Error);
      throw e;
    }
    const readyMs = performance.now() - t0;
    // Its id: the given one, else its variant's (a bare --weights DIR swapped for another checkpoint of it).
    const lane = this.make(spec, false);
    const at = this.#lanes.findIndex((l) => l.id === lane.id);
    if (at === 0) lane.engineState.promote();
    if (at < 0) {
      this.#add(lane);
      return { id: lane.id, outcome: 'added', readyMs, drainedMs: performance.now() - t0 };
    }
    const old = this.#lanes[at]!;
    this.#lanes[at] = lane;
    this.#watch(lane);
    this.#changed();
    await this.#retire(old);
    return { id: lane.id, outcome: 'swapped', readyMs, drainedMs: performance.now() - t0 };
  }

  /** Stops serving `id` (its new requests: 404), then drains and closes its lane. */
  async remove(id: string): Promise<void> {
    const at = this.#lanes.findIndex((l) => l.id === id);
    if (at < 0) throw notServed(id, this.#lanes);
    if (this.#lanes.length === 1) throw new RfdetrError('E_USAGE', `model ${JSON.stringify(id)} is the only one served: a server serves at least one model; add another before removing it`);
    const [old] = this.#lanes.splice(at, 1);
    this.#changed();
    await this.#retire(old!, true);
  }

  #add(lane: ModelLane): void {
    if (this.#lanes.some((l) => l.id === lane.id)) {
      lane.backend.destroy(new Error(`duplicate model id ${lane.id}`));
      throw new RfdetrError('E_USAGE', `two models have the id ${JSON.stringify(lane.id)}: give each its own (serve --weights ID=DIR, or "id" in the models file)`);
    }
    this.#lanes.push(lane);
    this.#watch(lane);
    this.#changed();
  }

  #watch(lane: ModelLane): void {
    lane.engineState.onChange(() => this.#changed());
  }

  #changed(): void {
    for (const fn of this.#listeners) fn();
  }

  /** Waits for the lane's requests to be answered, then closes its backend (in-flight forwards finish first). */
  async #retire(old: ModelLane, removed = false): Promise<void> {
    this.#retiring.add(old);
    old.engineState.detach();
    try {
      await old.idle();
      await old.backend.close();
    } finally {
      old.engineState.stop();
      this.#retiring.delete(old);
      if (removed && !this.#lanes.some((l) => l.id === old.id)) this.onRemoved?.(old.id);
    }
  }

  /** Called with the id of a model no longer served (its per-model series can go). */
  onRemoved?: (id: string) => void;
}

export type { BackendState };
