// `rfdetr serve`: the HTTP server (src/http) over a supervised sidecar (or an external one with
// --sidecar-socket). Wiring, plus what only cli/ may do: signal handlers and the exit status. SIGTERM/SIGINT
// → drain (readiness 503, in-flight requests finish within --deadline-ms, the sidecar is closed) → exit 0; a
// second signal while draining exits 1 at once. A backend that reaches `failed` (crash loop) drains and
// exits 1 so that systemd or the container runtime restarts the process; with several models (--weights ID=DIR
// repeated, --models FILE; serve-models.ts starts them) only once every model has failed. SIGHUP re-reads the
// key file and the models (a new or changed model swapped in without downtime).
import { createJsonLogger, createServer, type Logger, type LogLevel, type ModelSpec, type RfdetrServer, type WeightsInfo } from '../../src/http/index.ts';
import { checkDistinctIds, parseWeightsFlag, readModelsFile, type ModelEntry } from '../../src/http/models-file.ts';
import { withFields } from '../../src/log.ts';
import { RfdetrError } from '../../src/errors.ts';
import { resolveWeights, type ResolvedWeights } from '../../src/weights/resolve.ts';
import { lowerDecodePriority, lowerMainPriority } from '../../src/image/decode-priority.ts';
import { createReloader, modelIdOf, startModel, type ModelStartOptions, type ReloadReport, type StartedModel } from './serve-models.ts';

import { planMembers } from '../../src/sidecar/devices.ts';
import { deviceParamsFor } from './serve-device-params.ts';
import { externalSidecarModel } from './serve-model.ts';
import type { BackendRequest, CliContext } from '../context.ts';
import type { EngineFacts } from '../sidecar-info.ts';
import type { EngineFlags } from '../engine-flags.ts';
import { ApiKeys, readKeys, type ApiKeySource } from '../../src/http/auth.ts';


export interface ServeFlags extends Omit<EngineFlags, 'weights'> {
  /** --weights [ID=]DIR, repeatable: one model each. */
  weights?: string[];
  /** --models FILE: the models (models-file.ts), re-read on SIGHUP. */
  models?: string;
  /** --min-ready N: models that must be ready for /ready (default all). */
  minReady?: number;
  /** --admin-key-file FILE: turns POST /admin/reload on, with these keys. */
  adminKeyFile?: string;
  host: string;
  port: number;
  queueSize?: number;
  deadlineMs: number;
  sidecarSocket?: string;
  logLevel: LogLevel;
  allowUrlHost?: string[];
  videoMaxBytes: number;
  videoMaxDurationS: number;
  videoMaxFrames: number;
  videoMaxConcurrent: number;
  videoMaxUploads: number;
  videoClientUploads: number;
  videoDiskLimit?: number;
  videoMinUploadRate: number;
  devices?: number[] | 'all';
  workers?: number;
  minReadyDevices: number;
  memoryLimit?: number;
  apiKeyFile?: string;
  openMetrics?: boolean;
  openDocs?: boolean;
  trustProxy?: boolean;
  decodeNice: number;
  serverNice: number;
  engineNice: number;
  swapNice: number;
}


/** Raised when the server stopped because the backend failed for good: exit 1. */
export class BackendFailedError extends Error {
  override name = 'BackendFailedError';
}

/** `engine`: the spawned sidecar's engine facts, checked against --engine and --precision (null: external, or unknown). */
export async function runServe(ctx: CliContext, f: ServeFlags, engine: EngineFacts | null): Promise<void> {
  const logger = createJsonLogger(f.logLevel, (l) => void ctx.stderr.write(l));
  const log = (line: string) => logger.log('info', line);
  if (f.weights !== undefined && (f.model !== undefined || f.revision !== undefined)) {
    throw new RfdetrError('E_USAGE', '--weights DIR names the checkpoint directly; it cannot be combined with --model/--revision (use one or the other)');
  }
  if (f.weights !== undefined && f.models !== undefined) {
    throw new RfdetrError('E_USAGE', '--weights and --models both name the models: use one (the models file takes every model, with its id and weights)');
  }
  // The models: --models FILE, --weights [ID=]DIR repeated, or the one default checkpoint.
  const readEntries = (): ModelEntry[] => {
    if (f.models !== undefined) return readModelsFile(f.models);
    const entries = (f.weights ?? []).map(parseWeightsFlag);
    checkDistinctIds(entries, '--weights');
    return entries.length > 0 ? entries : [{}];
  };
  const entries = readEntries();
  const several = entries.length > 1 || f.models !== undefined;
  if (several && f.sidecarSocket) throw new RfdetrError('E_USAGE', '--sidecar-socket connects to one sidecar, which serves one model; it cannot be combined with several models (--models, --weights repeated)');
  if (entries.length > 1 && (f.devices !== undefined || f.workers !== undefined)) {
    throw new RfdetrError('E_USAGE', '--devices and --workers run one model on several sidecars; with several models each model has one sidecar: drop them, or serve one model');
  }
  const minReady = f.minReady ?? entries.length;
  if (minReady > entries.length) throw new RfdetrError('E_USAGE', `--min-ready ${minReady}: expected at most ${entries.length}, the number of models`);
  // Usage errors in the device flags before anything slow starts.
  const pool = poolFor(ctx, f, engine?.hostCores ?? null);
  // Before the first decode; the sidecar is spawned by the main thread, which keeps its priority.
  const decodePriority = await lowerDecodePriority(f.decodeNice);
  if (decodePriority.nice !== null) log(`decode threads: ${decodePriority.threads} reniced to ${decodePriority.nice} (--decode-nice ${f.decodeNice}; the sidecars start at ${decodePriority.nice - f.decodeNice})${decodePriority.note ? `; ${decodePriority.note}` : ''}${decodePriority.autogroup ? '; the kernel\'s autogroup scheduling is on: the server and its sidecars share one session, whose share of the CPU other sessions on this host split evenly with it (SERVING.md, --decode-nice)' : ''}`);
  else if (f.decodeNice !== 0) logger.log('warn', `--decode-nice ${f.decodeNice}: not applied: ${decodePriority.note}`, { event: 'decode_nice_unsupported' });
  const startOptions: ModelStartOptions = {
    ctx, logger, engine: f.engine, precision: f.precision, threads: f.threads, nice: f.engineNice, swapNice: f.swapNice, model: f.model, revision: f.revision, pool,
  };
  const fingerprints = new Map<string, string>();
  let specs: ModelSpec[];
  const started: StartedModel[] = [];
  if (f.sidecarSocket) specs = [await externalModel(ctx, f, logger)];
  else {
    for (const e of entries) started.push(await startModel(startOptions, e, !several));
    specs = started.map((m) => m.spec);
  }
  // Once the sidecars run (they keep the priority they started with): the main thread yields to their engines.
  const mainPriority = lowerMainPriority(f.serverNice);
  if (mainPriority.nice !== null) log(`main thread: nice ${mainPriority.nice} (--server-nice ${f.serverNice}): under load the sidecars' engines get the cores first; a sidecar started later (a restart, a reload) inherits it`);
  else if (f.serverNice !== 0) logger.log('warn', `--server-nice ${f.serverNice}: not applied: ${mainPriority.note}`, { event: 'server_nice_not_applied' });
  started.forEach((m) => fingerprints.set(modelIdOf(m.spec), m.fingerprint));
  const destroyAll = (e: Error) => {
    for (const s of specs) s.backend.destroy(e);
  };
  const keySource: ApiKeySource = f.apiKeyFile !== undefined ? { file: f.apiKeyFile } : { env: ctx.env.RFDETR_API_KEYS };
  let apiKeys: ApiKeys;
  let adminKeys: ApiKeys | undefined;
  try {
    apiKeys = new ApiKeys(readKeys(keySource));
    if (f.adminKeyFile !== undefined) {
      adminKeys = new ApiKeys(readKeys({ file: f.adminKeyFile }));
      if (!adminKeys.enabled) throw new Error(`--admin-key-file ${f.adminKeyFile} holds no key: expected one key per line`);
    }
  } catch (e) {
    destroyAll(e as Error);
    throw new RfdetrError('E_USAGE', (e as Error).message);
  }
  if (apiKeys.enabled) log(`API keys: ${apiKeys.count} loaded from ${f.apiKeyFile !== undefined ? '--api-key-file' : 'RFDETR_API_KEYS'}; every route but the probes needs one`);
  const members = pool?.members.length ?? 1;
  let reload: (() => Promise<ReloadReport>) | undefined;
  const server = createServer({
    models: specs, minReady, queueSize: f.queueSize, deadlineMs: f.deadlineMs, logger, allowUrlHosts: f.allowUrlHost,
    memoryLimit: f.memoryLimit, apiKeys, openMetrics: f.openMetrics, openDocs: f.openDocs, trustProxy: f.trustProxy, decodePriority, mainPriority, engineNice: f.sidecarSocket ? null : f.engineNice,
    videoLimits: {
      maxBytes: f.videoMaxBytes, maxDurationS: f.videoMaxDurationS, maxFrames: f.videoMaxFrames, maxVideos: f.videoMaxConcurrent,
      maxUploads: f.videoMaxUploads, clientUploads: f.videoClientUploads, diskLimit: f.videoDiskLimit, minUploadRate: f.videoMinUploadRate,
    },
    // Two requests per sidecar in flight, as for one: each resizes request N+1 while N is on its engine.
    engineConcurrency: 2 * members,
    deviceParams: deviceParamsFor({ ...f, precision: f.precision ?? engine?.defaultPrecision }, pool),
    ...(adminKeys ? {
      admin: {
        keys: adminKeys,
        reload: () => (reload ? reload() : Promise.reject(new RfdetrError('E_USAGE', 'nothing to reload: with --sidecar-socket the external sidecar serves the one model it loaded; restart it to change the model'))),
      },
    } : {}),
  });
  if (!f.sidecarSocket) {
    reload = createReloader(startOptions, server.models, () => {
      try {
        return readEntries();
      } catch (e) {
        throw new RfdetrError('E_USAGE', (e as Error).message);
      }
    }, fingerprints, { inc: (l) => server.metrics.modelSwaps.inc(l) });
  }
  try {
    await server.listen(f.host, f.port);
  } catch (e) {
    destroyAll(e as Error);
    throw e;
  }
  // SIGHUP re-reads the key file (a file that fails to read keeps the keys in force, and says why) and the models
  // (the models file, or --weights' checkpoints): a new or changed one is swapped in without downtime.
  const onHup = () => {
    try {
      apiKeys.set(readKeys(keySource));
      logger.log('info', `SIGHUP: ${apiKeys.count} API key(s) in force`, { event: 'api_keys_reloaded', count: apiKeys.count });
    } catch (e) {
      logger.log('error', `SIGHUP: the API keys were not reloaded, the previous ${apiKeys.count} stay in force: ${(e as Error).message}`, { event: 'api_keys_reload_failed' });
    }
    if (!reload) return;
    void reload().then(
      (r) => logger.log('info', `SIGHUP: models reloaded: ${r.models.map((m) => `${m.id} ${m.outcome}`).join(', ')}`, { event: 'models_reloaded', models: r.models }),
      (e: Error) => logger.log('error', `SIGHUP: the models were not reloaded, those served stay: ${e.message}`, { event: 'models_reload_failed' }),
    );
  };
  process.on('SIGHUP', onHup);
  const failure = await waitForStop(server, f.deadlineMs, logger).finally(() => process.off('SIGHUP', onHup));
  if (failure !== null) throw new BackendFailedError(`rfdetr serve: ${server.models.list().length > 1 ? 'every model failed' : 'the engine failed'} and the server stopped: ${failure}`);
}


/** --sidecar-socket: the one model is whatever the external sidecar loaded (its hello names it). */
async function externalModel(ctx: CliContext, f: ServeFlags, logger: Logger): Promise<ModelSpec> {
  const log = (line: string) => logger.log('info', line);
  const weightsDir = f.weights?.[0];
  let w: ResolvedWeights | null = null;
  try {
    w = await resolveWeights({ env: ctx.env, weightsDir, model: f.model, revision: f.revision, download: true, log, progress: null });
  } catch (e) {
    // An external sidecar loaded its own weights: what we would have loaded is only information for /info.
    log(`weights: not resolved here (${(e as Error).message.split('\n')[0]}); the external sidecar at ${f.sidecarSocket} loads its own`);
  }
  const weights: WeightsInfo | undefined = w
    ? { repo: w.repo ?? 'local', revision: w.revision, commit: w.commit, source: w.source, dir: w.dir, files: w.files, synthetic: w.synthetic }
    : undefined;
  const backend = await ctx.openBackend({
    engine: f.engine, weightsDir: w?.dir ?? '', threads: f.threads, precision: f.precision, nice: f.engineNice, socketPath: f.sidecarSocket, waitReady: false,
    log: (line) => logger.log('warn', line),
    logger: withFields(logger, { component: 'sidecar' }),
  });
  return { backend, weights, model: externalSidecarModel(backend, f.sidecarSocket!, w?.repo ?? null, log) };
}

/** The sidecars to run for --devices / --workers (undefined: one sidecar outside a pool, or an external one). */
function poolFor(ctx: CliContext, f: ServeFlags, hostCores: boolean | null): BackendRequest['pool'] {
  if (f.sidecarSocket) {
    if (f.devices !== undefined || f.workers !== undefined) {
      throw new RfdetrError('E_USAGE', '--sidecar-socket connects to one sidecar someone else runs; it cannot be combined with --devices or --workers');
    }
    return undefined;
  }
  const members = planMembers({ engine: f.engine, hostCores, devices: f.devices, workers: f.workers, threads: f.threads, env: ctx.env });
  if (f.minReadyDevices > members.length) {
    throw new RfdetrError('E_USAGE', `--min-ready-devices ${f.minReadyDevices}: expected at most ${members.length}, the number of sidecars (${members.map((m) => m.label).join(', ')})`);
  }
  return { members, minReady: f.minReadyDevices };
}

/**
 * Resolves after a drain triggered by SIGTERM/SIGINT (null) or by every model's backend having failed for good
 * (the first model's failure reason): with several models, one that fails is reported by id while the others
 * serve. A second signal while draining destroys the backends and exits 1 at once. The handlers are removed
 * afterwards.
 */
function waitForStop(server: RfdetrServer, drainMs: number, logger: Logger): Promise<string | null> {
  const lanes = server.models;
  return new Promise<string | null>((resolve) => {
    let draining = false;
    let failed: string | null = null;
    const stop = (why: string) => {
      if (draining) {
        logger.log('warn', `${why} again while draining: exiting now`, { event: 'forced_exit' });
        for (const l of lanes.all()) l.backend.destroy(new RfdetrError('E_DRAINING', `forced exit on a second ${why}`));
        process.exit(1);
      }
      draining = true;
      logger.log('info', `${why}: draining (up to ${drainMs} ms)`, { event: 'stopping', reason: why });
      void server.drain(drainMs).finally(() => {
        process.off('SIGTERM', onTerm);
        process.off('SIGINT', onInt);
        resolve(failed);
      });
    };
    const onTerm = () => stop('SIGTERM');
    const onInt = () => stop('SIGINT');
    process.on('SIGTERM', onTerm);
    process.on('SIGINT', onInt);
    // 'stopped' without a drain: the backend was destroyed for good (a sidecar naming another variant).
    const check = () => {
      if (draining || lanes.liveCount() > 0) return;
      const reasons = lanes.list().map((l) => (lanes.list().length > 1 ? `${l.id}: ` : '') + (l.backend.failureReason ?? 'the sidecar failed (no reason given)'));
      failed = reasons.join('; ');
      stop(lanes.list().length > 1 ? 'every model failed and none is restarting' : 'the engine failed and is not restarting');
    };
    lanes.onChange(check);
    check();
  });
}
