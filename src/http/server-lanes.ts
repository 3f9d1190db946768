// The server's models as lanes (model-lanes.ts): each model given to createServer gets its engine state (its
// per-model state metric) and an engine queue on the server's one fair share (fair-share.ts: every model's
// sidecar runs on the same cores, so a client's engine time counts on every model, swapped-in lanes included),
// and the frame deps its requests run with (the per-model forward counters, the forward-time average behind
// Retry-After). Also the sums over the lanes that the gauges and Retry-After read.
import { EngineQueue } from './engine-queue.ts';
import { EngineState } from './engine-state.ts';
import { FairShare } from './fair-share.ts';
import type { ServerMetrics } from './metrics.ts';
import { laneOf, ModelLanes, type LaneFactory, type ModelLane, type ModelSpec } from './model-lanes.ts';
import { modelIdentityOf, type ModelIdentity } from './model-identity.ts';
import type { FrameDeps } from './predict-context.ts';

export interface ServerLanesOptions {
  specs: ModelSpec[];
  /** Models that must be ready for /ready (default all). */
  minReady: number | undefined;
  metrics: ServerMetrics;
  /** Requests handed to a model's sidecar(s) at once, unless its spec says otherwise. */
  engineConcurrency: number;
  /** COCO-91 labels by class index, for a backend whose hello carries none. */
  fallbackLabels: readonly string[];
}

/** What a request's frames run with besides their lane's own parts. */
export type SharedFrameDeps = Pick<FrameDeps, 'admission' | 'metrics' | 'deadlineMs' | 'decode'>;

export interface ServerLanes {
  lanes: ModelLanes;
  /** `f` summed over every lane with a backend (those being retired too). */
  sum(f: (l: ModelLane) => number): number;
  /** Moves the engine busy-time counter up to now (each queue keeps a running total). */
  accountBusy(): void;
  /** The average forward time, ms (0 before the first): Retry-After's estimate. */
  forwardEwmaMs(): number;
  /** The frame deps of a lane's requests. */
  laneDeps(lane: ModelLane, shared: SharedFrameDeps): FrameDeps;
}

export function createServerLanes(o: ServerLanesOptions): ServerLanes {
  const { metrics } = o;
  const fairShare = new FairShare();
  const makeLane: LaneFactory = (spec, primary) => {
    const identity = modelSource(spec.model);
    const engineState = new EngineState(spec.backend, metrics, { modelId: spec.id ?? identity().id, primary });
    return laneOf({
      fixedId: spec.id, identity, backend: spec.backend, engineState,
      engine: new EngineQueue(spec.backend, spec.engineConcurrency ?? o.engineConcurrency, fairShare),
      weights: spec.weights, params: spec.params ?? {},
      labels: () => (spec.backend.info?.labels?.length ? spec.backend.info.labels : o.fallbackLabels),
    });
  };
  const lanes = new ModelLanes(makeLane, o.specs, o.minReady ?? o.specs.length);
  lanes.onRemoved = (id) => metrics.setModelState(id, null);
  const lastBusyMs = new WeakMap<ModelLane, number>();
  let forwardEwmaMs = 0;
  return {
    lanes,
    sum: (f) => lanes.all().reduce((n, l) => n + f(l), 0),
    accountBusy() {
      for (const l of lanes.all()) {
        const busy = l.engine.busyMs();
        metrics.engineBusySeconds.inc(Math.max(0, busy - (lastBusyMs.get(l) ?? 0)) / 1000);
        lastBusyMs.set(l, busy);
      }
    },
    forwardEwmaMs: () => forwardEwmaMs,
    laneDeps: (lane, shared) => ({
      ...shared, backend: lane.backend, engine: lane.engine, labels: lane.labels,
      onForward: (ms) => {
        metrics.engineForwardSeconds.inc(ms / 1000);
        forwardEwmaMs = forwardEwmaMs === 0 ? ms : 0.8 * forwardEwmaMs + 0.2 * ms;
        metrics.modelForwards.inc({ model: lane.id });
        metrics.modelForwardSeconds.inc({ model: lane.id }, ms / 1000);
      },
    }),
  };
}

/** The variant a spec names: a function is asked at every call (an external sidecar's hello). */
function modelSource(m: ModelSpec['model']): () => ModelIdentity {
  if (typeof m === 'function') return m;
  const fixed = m ?? modelIdentityOf(null, null);
  return () => fixed;
}
