// `rfdetr serve`'s models: each entry (--weights ID=DIR, --models FILE) resolved to its checkpoint and started as
// its own sidecar (a ModelSpec for the server), and the reload that SIGHUP and POST /admin/reload run: the
// entries read again (the file, or the same --weights list) and compared with what is served; a new or changed
// one is started and warmed (its sidecar's READY comes after its warm-up forwards), then put in place of the old,
// which drains and stops (model-lanes.ts); a removed one stops being served. A model that cannot start is served
// as failed (reported by id) at start-up, and leaves the old one serving on a reload.
import path from 'node:path';
import type { ModelLanes, ModelSpec, WeightsInfo, Logger } from '../../src/http/index.ts';
import { modelIdentityOf } from '../../src/http/index.ts';
import { entryFingerprint, type ModelEntry } from '../../src/http/models-file.ts';
import type { BackendState, InferenceBackend } from '../../src/sidecar/backend.ts';
import { failedBackend } from '../../src/sidecar/failed-backend.ts';
import { resolveWeights } from '../../src/weights/resolve.ts';
import { syntheticWarning } from '../../src/weights/synthetic.ts';
import { checkpointVariant } from '../../src/weights/verify.ts';
import { withFields } from '../../src/log.ts';
import type { BackendRequest, CliContext } from '../context.ts';
import { checkEngine } from '../engine-check.ts';
import { checkSidecarVariant } from './serve-model.ts';

export interface ModelStartOptions {
  ctx: CliContext;
  logger: Logger;
  /** The flags' engine, precision and threads: an entry's own engine/precision beat them. */
  engine: string;
  precision: string | undefined;
  threads: number | undefined;
  nice: number;
  /** serve --swap-nice: a sidecar a reload starts loads and warms up at this nice (0: as the others). */
  swapNice: number;
  model: string | undefined;
  revision: string | undefined;
  /** --devices / --workers (one model only). */
  pool: BackendRequest['pool'];
}

/** A started model: its spec for the server and what a reload compares. */
export interface StartedModel {
  spec: ModelSpec;
  fingerprint: string;
}

/**
 * Resolves `entry`'s checkpoint and spawns its sidecar (not waiting for it: probes say "starting"). `strict`: a
 * failure throws (one model: serve exits as before); else it is served as a failed model under its id.
 */
export async function startModel(o: ModelStartOptions, entry: ModelEntry, strict: boolean, swapping = false): Promise<StartedModel> {
  const fingerprint = entryFingerprint(entry);
  const log = (line: string) => o.logger.log('info', line, { model: entry.id ?? null });
  const engine = entry.engine ?? o.engine;
  const precision = entry.precision ?? o.precision;
  try {
    if (entry.engine !== undefined || entry.precision !== undefined) await checkEngine(o.ctx, engine, precision);
    const w = await resolveWeights({ env: o.ctx.env, weightsDir: entry.weights, model: o.model, revision: o.revision, download: true, log, progress: null });
    if (w.synthetic) o.logger.log('warn', syntheticWarning(w.dir, { synthetic: true, seed: w.syntheticSeed }), { event: 'synthetic_weights', model: entry.id ?? null });
    const weights: WeightsInfo = { repo: w.repo ?? 'local', revision: w.revision, commit: w.commit, source: w.source, dir: w.dir, files: w.files, synthetic: w.synthetic };
    const variant = checkpointVariant(w.files.model);
    const backend = await o.ctx.openBackend({
      engine, weightsDir: w.dir, threads: o.threads, precision, nice: o.nice, waitReady: false, pool: o.pool,
      // Swapped in while the others serve: its load and warm-up forwards yield the cores to theirs (bench/swap).
      ...(swapping && o.swapNice > 0 ? { loadNice: o.swapNice } : {}),
      log: (line) => o.logger.log('warn', line, { model: entry.id ?? null }),
      logger: withFields(o.logger, { component: 'sidecar', ...(entry.id !== undefined ? { model: entry.id } : {}) }),
    });
    checkSidecarVariant(backend, variant, w.dir, (err) => {
      o.logger.log('error', err.message, { event: 'variant_mismatch', model: entry.id ?? null });
      backend.destroy(err);
    });
    const spec: ModelSpec = {
      backend, weights, model: modelIdentityOf(variant, w.repo ?? null),
      params: { engine, ...(precision !== undefined ? { precision } : {}) },
      ...(entry.id !== undefined ? { id: entry.id } : {}),
    };
    return { spec, fingerprint };
  } catch (e) {
    if (strict) throw e;
    const reason = (e as Error).message.split('\n')[0]!;
    const id = entry.id ?? `model-${entry.weights ?? 'default'}`;
    o.logger.log('error', `model ${id} did not start: ${reason}`, { event: 'model_failed', model: id });
    return { spec: { id, backend: failedBackend(reason), params: { engine, ...(precision !== undefined ? { precision } : {}) } }, fingerprint };
  }
}

/** The id a spec is served under: its own, else its variant's. */
export function modelIdOf(s: ModelSpec): string {
  const m = typeof s.model === 'function' ? s.model() : s.model;
  return s.id ?? m?.id ?? modelIdentityOf(null, null).id;
}

/** Resolves when `b` is ready; rejects when it fails or stops first (its reason). */
export function untilReady(b: InferenceBackend): Promise<void> {
  return new Promise((resolve, reject) => {
    const settle = (s: BackendState) => {
      if (s === 'ready') return (off(), resolve());
      if (s === 'failed' || s === 'stopped') return (off(), reject(new Error(b.failureReason ?? `the sidecar ${s} before it was ready`)));
    };
    const off = b.onStateChange((s) => settle(s));
    settle(b.state);
  });
}

export interface ReloadReport {
  models: Array<{ id: string; outcome: 'added' | 'swapped' | 'removed' | 'unchanged' | 'failed'; ready_ms?: number; drained_ms?: number; error?: string }>;
}

/**
 * The reload: `read()` gives the entries now (the models file re-read, or --weights' list); each is compared
 * with what was started for its id. Reloads run one at a time (a second waits for the first).
 */
export function createReloader(o: ModelStartOptions, lanes: ModelLanes, read: () => ModelEntry[], started: Map<string, string>, metrics: { inc: (labels: { model: string; outcome: string }) => void }) {
  let chain: Promise<unknown> = Promise.resolve();
  const once = async (): Promise<ReloadReport> => {
    const entries = read();
    const report: ReloadReport = { models: [] };
    const keep = new Set<string>();
    for (const entry of entries) {
      const key = entry.id ?? lanes.list().find((l) => started.get(l.id) !== undefined && entry.weights !== undefined && l.weights?.dir !== undefined && path.resolve(l.weights.dir) === path.resolve(entry.weights))?.id;
      if (key !== undefined) keep.add(key);
      const fp = entryFingerprint(entry);
      if (key !== undefined && started.get(key) === fp && lanes.list().some((l) => l.id === key)) {
        report.models.push({ id: key, outcome: 'unchanged' });
        continue;
      }
      const s = await startModel(o, entry, true, true).catch((e: Error) => e);
      const id = key ?? entry.id ?? entry.weights ?? 'default';
      if (s instanceof Error) {
        report.models.push({ id, outcome: 'failed', error: s.message.split('\n')[0]! });
        metrics.inc({ model: id, outcome: 'failed' });
        continue;
      }
      // An entry without an id keeps the id it was served under (its variant's, unless the checkpoint is now
      // another variant).
      if (s.spec.id === undefined && key !== undefined && modelIdOf(s.spec) !== key) s.spec.id = key;
      try {
        const r = await lanes.put(s.spec, untilReady);
        started.set(r.id, s.fingerprint);
        keep.add(r.id);
        report.models.push({ id: r.id, outcome: r.outcome, ready_ms: Math.round(r.readyMs), drained_ms: Math.round(r.drainedMs) });
        metrics.inc({ model: r.id, outcome: r.outcome });
        o.logger.log('info', `model ${r.id} ${r.outcome}: ready after ${Math.round(r.readyMs)} ms, the old one drained and stopped after ${Math.round(r.drainedMs)} ms`, { event: `model_${r.outcome}`, model: r.id, ready_ms: r.readyMs, drained_ms: r.drainedMs });
      } catch (e) {
        report.models.push({ id, outcome: 'failed', error: (e as Error).message.split('\n')[0]! });
        metrics.inc({ model: id, outcome: 'failed' });
        o.logger.log('error', `model ${id}: the new checkpoint did not start (${(e as Error).message.split('\n')[0]}); the one served before keeps serving`, { event: 'model_swap_failed', model: id });
      }
    }
    for (const l of [...lanes.list()]) {
      if (keep.has(l.id)) continue;
      await lanes.remove(l.id);
      started.delete(l.id);
      report.models.push({ id: l.id, outcome: 'removed' });
      metrics.inc({ model: l.id, outcome: 'removed' });
      o.logger.log('info', `model ${l.id} removed: its requests are answered 404`, { event: 'model_removed', model: l.id });
    }
    return report;
  };
  return (): Promise<ReloadReport> => {
    const next = chain.then(once, once);
    chain = next.catch(() => {});
    return next;
  };
}
