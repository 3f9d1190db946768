// `rfdetr serve`: the HTTP server over a supervised (or external) sidecar. The definition only; the work and
// its heavy modules (express, sharp, undici) load when the command runs, so --help stays fast.
import { Command, InvalidArgumentError, Option } from 'commander';
import { RfdetrError } from '../../src/errors.ts';
import { isLogLevel, LOG_LEVELS, type LogLevel } from '../../src/http/log.ts';
import { DEFAULT_VIDEO_LIMITS } from '../../src/http/video-limits.ts';
import { parseDeviceList } from '../../src/sidecar/devices.ts';
import { MIN_MEMORY_LIMIT } from '../../src/http/memory-budget.ts';
import { parseAllowedHost } from '../../src/image/allowed-host.ts';
import { DEFAULT_DECODE_NICE, DEFAULT_SERVER_NICE } from '../../src/image/decode-priority.ts';
import { DEFAULT_ENGINE_NICE } from '../../src/sidecar/backend.ts';
import type { CliContext } from '../context.ts';
import { checkEngine } from '../engine-check.ts';
import { addEngineOptions } from '../engine-flags.ts';
import { EXIT_HELP } from '../failures.ts';
import { intParser } from '../parsers.ts';
import type { ServeFlags } from './serve-run.ts';

export const DEFAULT_PORT = 20000;

function parseLogLevel(v: string): LogLevel {
  if (!isLogLevel(v)) throw new InvalidArgumentError(`expected one of ${LOG_LEVELS.join(', ')} but received ${JSON.stringify(v)}`);
  return v;
}

/** One --allow-url-host value: HOST (ports 80 and 443) or HOST:PORT (that port only); no scheme or path. */
function parseUrlHost(v: string, prev: string[] | undefined): string[] {
  try {
    parseAllowedHost(v);
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message);
  }
  return [...(prev ?? []), v.trim().toLowerCase()];
}

/** --memory-limit: bytes, or a number with K/M/G (powers of 1024), e.g. 1G, 768M. */
export function parseMemoryLimit(v: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*$/i.exec(v);
  const unit = m?.[2]?.[0]?.toLowerCase();
  const n = m ? Math.floor(Number(m[1]) * (unit === 'k' ? 1024 : unit === 'm' ? 1024 ** 2 : unit === 'g' ? 1024 ** 3 : 1)) : NaN;
  if (!Number.isSafeInteger(n) || n < MIN_MEMORY_LIMIT) {
    throw new InvalidArgumentError(`expected a size of at least ${MIN_MEMORY_LIMIT / 2 ** 20}M (bytes, or with K, M or G: 768M, 1G) but received ${JSON.stringify(v)}`);
  }
  return n;
}

/** The --video-* flags that bound each other: refused before anything starts (exit 2). */
export function checkVideoFlags(f: Pick<ServeFlags, 'videoMaxBytes' | 'videoDiskLimit' | 'videoMaxUploads' | 'videoClientUploads'>): void {
  if (f.videoDiskLimit !== undefined && f.videoDiskLimit < 2 * f.videoMaxBytes) {
    throw new RfdetrError('E_USAGE', `--video-disk-limit ${f.videoDiskLimit}: expected at least 2 × --video-max-bytes (${2 * f.videoMaxBytes}), so a video at the byte limit fits in one client's half; raise it or lower --video-max-bytes`);
  }
  if (f.videoClientUploads > f.videoMaxUploads) {
    throw new RfdetrError('E_USAGE', `--video-client-uploads ${f.videoClientUploads}: expected at most --video-max-uploads (${f.videoMaxUploads}), the uploads of all clients together`);
  }
}

function parseDevices(v: string): number[] | 'all' {
  try {
    return parseDeviceList(v);
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message.replace(/^--devices: /, ''));
  }
}

export function serveCommand(ctx: CliContext): Command {
  const cmd = new Command('serve')
    .description('serve the model over HTTP (POST /predict, POST /predict/video, probes, metrics; Roboflow- and DeepStack-compatible routes) with a supervised sidecar')
    .addOption(new Option('--host <host>', 'address to listen on').default('127.0.0.1'))
    .addOption(new Option('--port <port>', 'TCP port').argParser(intParser(0, 65535)).default(DEFAULT_PORT))
    .addOption(new Option('--queue-size <n>', 'images admitted but not yet on the engine, over all clients (one client: half); more → 503 (default 32)').argParser(intParser(1, 100_000)))
    .addOption(new Option('--memory-limit <size>', 'bytes all requests together may hold: bodies, downloads, decoded pixels, annotated output (K/M/G suffixes; default 1G, for a 4 GB container)').argParser(parseMemoryLimit))
    .addOption(new Option('--api-key-file <file>', 'require an API key (one per line in FILE, re-read on SIGHUP) on every route but the probes; beats RFDETR_API_KEYS'))
    .addOption(new Option('--open-metrics', 'with API keys on: /metrics answers without a key'))
    .addOption(new Option('--open-docs', 'with API keys on: /docs and /openapi.json answer without a key'))
    .addOption(new Option('--trust-proxy', 'a proxy in front sets X-Forwarded-For: its last entry names the client for the fair share'))
    .addOption(new Option('--deadline-ms <ms>', 'per-request deadline → 504, and the drain budget on SIGTERM').argParser(intParser(1, 86_400_000)).default(60_000))
    .addOption(new Option('--sidecar-socket <path>', 'connect to a sidecar someone else runs (systemd) instead of spawning one; it serves the checkpoint it loaded (any RF-DETR variant, Nano to Large)'))
    .addOption(new Option('--video-max-bytes <n>', 'largest POST /predict/video upload, bytes; more → 413').argParser(intParser(1, 2 ** 40)).default(DEFAULT_VIDEO_LIMITS.maxBytes))
    .addOption(new Option('--video-max-duration-s <s>', 'longest POST /predict/video video, seconds; longer → 422').argParser(intParser(1, 86_400)).default(DEFAULT_VIDEO_LIMITS.maxDurationS))
    .addOption(new Option('--video-max-frames <n>', 'most frames in a POST /predict/video video; more → 422').argParser(intParser(1, 10_000_000)).default(DEFAULT_VIDEO_LIMITS.maxFrames))
    .addOption(new Option('--video-max-concurrent <n>', 'videos decoded at once, each taking its slot once its upload is complete; more → 503').argParser(intParser(1, 64)).default(DEFAULT_VIDEO_LIMITS.maxVideos))
    .addOption(new Option('--video-max-uploads <n>', 'POST /predict/video uploads arriving at once, over all clients; more → 503').argParser(intParser(1, 4096)).default(DEFAULT_VIDEO_LIMITS.maxUploads))
    .addOption(new Option('--video-client-uploads <n>', 'of those, what one client (API key, else address) may have; more → 503').argParser(intParser(1, 4096)).default(DEFAULT_VIDEO_LIMITS.clientUploads))
    .addOption(new Option('--video-disk-limit <n>', 'bytes of video uploads on the server\'s disk at once (arriving, or complete and running), half of it per client; more → 503 (default 4 × --video-max-bytes: 1 GiB)').argParser(intParser(1, 2 ** 50)))
    .addOption(new Option('--video-min-upload-rate <n>', `bytes/s a video upload must average after its first ${DEFAULT_VIDEO_LIMITS.uploadGraceMs / 1000} s; slower → 408, the connection closed`).argParser(intParser(1, 2 ** 40)).default(DEFAULT_VIDEO_LIMITS.minUploadRate))
    .addOption(new Option('--devices <list>', 'one sidecar per card: card indices (0,1,2,3) or "all" (every card in /dev/tenstorrent); each sees only its card and has its own TT_METAL_CACHE').argParser(parseDevices))
    .addOption(new Option('--workers <n>', 'N sidecars of the host engine (cpu, tt-host) behind one queue; --threads N each, or with --threads 0 (the default) the physical cores split among them').argParser(intParser(1, 256)))
    .addOption(new Option('--min-ready-devices <n>', '/ready is 200 while at least this many sidecars are ready (default 1)').argParser(intParser(1, 1024)).default(1))
    .addOption(new Option('--allow-url-host <host>', 'let /predict fetch image_url from HOST (ports 80/443) or HOST:PORT (repeatable; off by default); a loopback or private address must be named as the address itself').argParser(parseUrlHost))
    .addOption(new Option('--decode-nice <n>', `the server's decode threads (sharp, libuv's pool) run this much nicer than its main thread and the sidecar's engine, so one client's huge decodes do not slow every client's forward; 0 = off (Linux only)`).argParser(intParser(0, 19)).default(DEFAULT_DECODE_NICE))
    .addOption(new Option('--server-nice <n>', `once its sidecars run, the server's main thread (request handling) runs this much nicer, so under load the engines' forward threads get the cores first; needs no privilege. A sidecar started later (a restart, a reload) inherits it and then shares the main thread's priority; 0 = off (Linux only)`).argParser(intParser(0, 19)).default(DEFAULT_SERVER_NICE))
    .addOption(new Option('--engine-nice <n>', `-20..0: the spawned sidecar raises its CPU priority (every thread; it shares the server's session and autogroup) to this nice value at start, where the host permits it (root, CAP_SYS_NICE, RLIMIT_NICE; else a warning and it runs as started; /info sidecar.nice says which); 0 = off (Linux only)`).argParser(intParser(-20, 0)).default(DEFAULT_ENGINE_NICE))
    .addOption(new Option('--swap-nice <n>', '0..19: a sidecar a reload starts (SIGHUP, POST /admin/reload) loads its checkpoint and warms up at this nice, so the models already serving keep the cores, then goes back to --engine-nice before it serves; only where --engine-nice is applied (going back needs that privilege); 0 = off (the default: at 19 on a host saturated by other work, one measured swap took 134 s to be ready instead of 3-6 s)').argParser(intParser(0, 19)).default(0))
    .addOption(new Option('--log-level <level>', `${LOG_LEVELS.join(' | ')}`).argParser(parseLogLevel).default('info'))
    .addOption(new Option('--models <file>', 'serve the models a JSON file lists, {"models": [{"id": "nano", "weights": DIR, "engine"?: E, "precision"?: P}]}, each its own sidecar and queue; re-read on SIGHUP (a new or changed model is swapped in without downtime, a removed one answers 404)'))
    .addOption(new Option('--min-ready <n>', 'with several models: /ready is 200 once this many are ready (default: all)').argParser(intParser(1, 1024)))
    .addOption(new Option('--admin-key-file <file>', 'turn on POST /admin/reload (the SIGHUP reload over HTTP), open only to a key in FILE (one per line; API keys are not admin keys)'));
  addEngineOptions(cmd);
  // serve takes several checkpoints: --weights is repeatable, each ID=DIR or a bare DIR (its id follows the variant).
  const weights = cmd.options.find((o) => o.long === '--weights')!;
  weights.description = 'checkpoint directory with model.safetensors + config.json (beats TT_RF_DETR_WEIGHTS); repeat as ID=DIR to serve several models, each its own sidecar and queue (a bare DIR: the id follows the variant, e.g. rf-detr-nano); re-checked on SIGHUP';
  weights.argParser((v: string, prev: string[] | undefined) => [...(prev ?? []), v]);
  return cmd
    .addHelpText('after', `${EXIT_HELP}\n\nSIGTERM/SIGINT drain and exit 0. Without weights (no --weights, no cache, no Hub) serve exits 1 listing what it tried.\n\nClients of other servers work unchanged on the same queue, budgets and API keys: Roboflow's inference-sdk (GET /model/registry, POST /infer/object_detection, /infer/instance_segmentation; model_id: the /v1/models id or e.g. rf-detr-base) and DeepStack / CodeProject.AI clients (POST /v1/vision/detection, /v1/vision/custom/{model}); their api_key field is checked against --api-key-file / RFDETR_API_KEYS. SERVING.md, "Clients of other servers".\n\nSeveral models: --weights ID=DIR repeated, or --models FILE; requests pick one with "model" (a JSON or multipart field, or ?model=ID; default the first), GET /v1/models lists them. SIGHUP re-reads the models (and the key file): a new or changed checkpoint is started and warmed, then takes the new requests while the old one finishes its own and stops; reloads at once run one after another. One queue per model, one admission, memory budget and engine-time fair share across them. serve exits 1 once every model has failed. SERVING.md, "Several models".`)
    .action(async (f: ServeFlags) => {
      // --engine and --precision are checked before the server's modules load, so that a usage error answers
      // at once. An external sidecar runs whatever engine and precision it was started with.
      checkVideoFlags(f);
      const engine = f.sidecarSocket ? null : await checkEngine(ctx, f.engine, f.precision);
      return (await import('./serve-run.ts')).runServe(ctx, f, engine);
    });
}
