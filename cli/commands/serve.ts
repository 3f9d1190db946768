// `rfdetr serve`: the HTTP server (src/http) over a supervised sidecar (or an external one with
// --sidecar-socket). Wiring, plus what only cli/ may do: signal handlers and the exit status. SIGTERM/SIGINT
// → drain (readiness 503, in-flight requests finish within --deadline-ms, the sidecar is closed) → exit 0; a
// second signal while draining exits 1 at once. A backend that reaches `failed` (crash loop) drains and
// exits 1 so that systemd or the container runtime restarts the process.
import { Command, InvalidArgumentError, Option } from 'commander';
import { createJsonLogger, createServer, isLogLevel, LOG_LEVELS, type Logger, type LogLevel, type RfdetrServer, type WeightsInfo } from '../../src/http/index.ts';
import type { InferenceBackend } from '../../src/sidecar/backend.ts';
import { RfdetrError } from '../../src/errors.ts';
import { resolveWeights, type ResolvedWeights } from '../../src/weights/resolve.ts';
import type { CliContext } from '../context.ts';
import { addEngineOptions, EXIT_HELP, intParser, type EngineFlags } from '../options.ts';

export const DEFAULT_PORT = 20000;

interface ServeFlags extends EngineFlags {
  host: string;
  port: number;
  queueSize?: number;
  deadlineMs: number;
  sidecarSocket?: string;
  logLevel: LogLevel;
  allowUrlHost?: string[];
}

/** One --allow-url-host value: a host name or IP address (no scheme, port or path). */
function parseUrlHost(v: string, prev: string[] | undefined): string[] {
  const h = v.trim().toLowerCase();
  if (!/^(\[[0-9a-f:.]+\]|[0-9a-f:.]*:[0-9a-f:.]*|[a-z0-9]([a-z0-9.-]*[a-z0-9])?)$/.test(h)) {
    throw new InvalidArgumentError(`expected a host name or IP address (e.g. images.example.com or 127.0.0.1, no scheme or port) but received ${JSON.stringify(v)}`);
  }
  return [...(prev ?? []), h];
}

function parseLogLevel(v: string): LogLevel {
  if (!isLogLevel(v)) throw new InvalidArgumentError(`expected one of ${LOG_LEVELS.join(', ')} but received ${JSON.stringify(v)}`);
  return v;
}

/** Raised when the server stopped because the backend failed for good: exit 1. */
export class BackendFailedError extends Error {
  override name = 'BackendFailedError';
}

async function runServe(ctx: CliContext, f: ServeFlags): Promise<void> {
  const logger = createJsonLogger(f.logLevel, (l) => void ctx.stderr.write(l));
  const log = (line: string) => logger.log('info', line);
  if (f.weights !== undefined && (f.model !== undefined || f.revision !== undefined)) {
    throw new RfdetrError('E_USAGE', '--weights DIR names the checkpoint directly; it cannot be combined with --model/--revision (use one or the other)');
  }
  let w: ResolvedWeights | null = null;
  try {
    w = await resolveWeights({ env: ctx.env, weightsDir: f.weights, model: f.model, revision: f.revision, download: true, log, progress: null });
  } catch (e) {
    // An external sidecar loaded its own weights: what we would have loaded is only information for /info.
    if (!f.sidecarSocket) throw e;
    log(`weights: not resolved here (${(e as Error).message.split('\n')[0]}); the external sidecar at ${f.sidecarSocket} loads its own`);
  }
  const weights: WeightsInfo | undefined = w
    ? { repo: w.repo ?? 'local', revision: w.revision, commit: w.commit, source: w.source, dir: w.dir, files: w.files }
    : undefined;
  const backend = await ctx.openBackend({
    engine: f.engine, weightsDir: w?.dir ?? '', threads: f.threads, precision: f.precision, socketPath: f.sidecarSocket, waitReady: false,
    log: (line) => logger.log('warn', line),
    logger: {
      debug: (m, fields) => logger.log('debug', m, { component: 'sidecar', ...fields }),
      info: (m, fields) => logger.log('info', m, { component: 'sidecar', ...fields }),
      warn: (m, fields) => logger.log('warn', m, { component: 'sidecar', ...fields }),
      error: (m, fields) => logger.log('error', m, { component: 'sidecar', ...fields }),
    },
  });
  const server = createServer({
    backend, weights, queueSize: f.queueSize, deadlineMs: f.deadlineMs, logger, allowUrlHosts: f.allowUrlHost,
    deviceParams: { engine: f.engine, threads: f.threads ?? 0, sidecar_socket: f.sidecarSocket ?? null },
  });
  try {
    await server.listen(f.host, f.port);
  } catch (e) {
    backend.destroy(e as Error);
    throw e;
  }
  const failed = await waitForStop(server, backend, f.deadlineMs, logger);
  if (failed) throw new BackendFailedError('rfdetr serve: the engine failed (it crashed repeatedly) and the server stopped; the log above has the sidecar\'s exit status and stderr');
}

/**
 * Resolves after a drain triggered by SIGTERM/SIGINT (false) or by the backend reaching `failed` (true). A
 * second signal while draining destroys the backend and exits 1 at once. The handlers are removed afterwards.
 */
function waitForStop(server: RfdetrServer, backend: InferenceBackend, drainMs: number, logger: Logger): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    let draining = false;
    let failed = false;
    const stop = (why: string) => {
      if (draining) {
        logger.log('warn', `${why} again while draining: exiting now`, { event: 'forced_exit' });
        backend.destroy(new RfdetrError('E_DRAINING', `forced exit on a second ${why}`));
        process.exit(1);
      }
      draining = true;
      logger.log('info', `${why}: draining (up to ${drainMs} ms)`, { event: 'stopping', reason: why });
      void server.drain(drainMs).finally(() => {
        clearInterval(watch);
        process.off('SIGTERM', onTerm);
        process.off('SIGINT', onInt);
        resolve(failed);
      });
    };
    const onTerm = () => stop('SIGTERM');
    const onInt = () => stop('SIGINT');
    process.on('SIGTERM', onTerm);
    process.on('SIGINT', onInt);
    const watch = setInterval(() => {
      if (backend.state === 'failed' && !draining) {
        failed = true;
        stop('the engine failed and is not restarting');
      }
    }, 500);
  });
}

export function serveCommand(ctx: CliContext): Command {
  const cmd = new Command('serve')
    .description('serve the model over HTTP (POST /predict, probes, metrics) with a supervised sidecar')
    .addOption(new Option('--host <host>', 'address to listen on').default('127.0.0.1'))
    .addOption(new Option('--port <port>', 'TCP port').argParser(intParser(0, 65535)).default(DEFAULT_PORT))
    .addOption(new Option('--queue-size <n>', 'requests admitted but not yet on the engine; more → 503 (default 16)').argParser(intParser(1, 100_000)))
    .addOption(new Option('--deadline-ms <ms>', 'per-request deadline → 504, and the drain budget on SIGTERM').argParser(intParser(1, 86_400_000)).default(60_000))
    .addOption(new Option('--sidecar-socket <path>', 'connect to a sidecar someone else runs (systemd) instead of spawning one'))
    .addOption(new Option('--allow-url-host <host>', 'let /predict fetch image_url from this host (repeatable; off by default); a loopback or private address must be named as the address itself').argParser(parseUrlHost))
    .addOption(new Option('--log-level <level>', `${LOG_LEVELS.join(' | ')}`).argParser(parseLogLevel).default('info'));
  addEngineOptions(cmd);
  return cmd
    .addHelpText('after', `${EXIT_HELP}\n\nSIGTERM/SIGINT drain and exit 0. Without weights (no --weights, no cache, no Hub) serve exits 1 listing what it tried.`)
    .action(async (f: ServeFlags) => runServe(ctx, f));
}
