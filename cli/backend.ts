// The default BackendFactory: the supervised sidecar from src/sidecar (spawned, CPU engine by default), or a
// connection to an external one (`--sidecar-socket`). Resolves once the sidecar is ready unless asked not to.
import { createLogger } from '../src/log.ts';
import type { BackendFactory } from './context.ts';

export const openSidecarBackend: BackendFactory = async (req) => {
  // Imported here, not at the top: the supervisor pulls in execa, which --help and --version must not load.
  const { createBackend, createPool } = await import('../src/sidecar/index.ts');
  const logger = req.logger ?? createLogger('warn', (level, m) => req.log(`sidecar: ${level === 'warn' ? 'warning' : level}: ${m}`));
  const common = {
    engine: req.engine,
    weightsDir: req.weightsDir || undefined,
    threads: req.threads,
    precision: req.precision,
    nice: req.nice,
    loadNice: req.loadNice,
    socketPath: req.socketPath,
    external: req.socketPath !== undefined,
    logger,
    // A one-shot command (detect, bench, verify) fails at the first sidecar death instead of retrying a broken
    // engine with backoff for a minute; `serve` keeps the supervisor's restart policy.
    ...(req.waitReady === false ? {} : { restart: { maxCrashes: 0 } }),
  };
  const backend = req.pool
    ? createPool({ members: req.pool.members.map((m) => ({ ...common, label: m.label, env: m.env, ...(m.threads !== undefined ? { threads: m.threads } : {}) })), minReady: req.pool.minReady, logger })
    : createBackend(common);
  if (req.waitReady === false) return backend;
  try {
    await backend.ready();
  } catch (e) {
    backend.destroy(e as Error);
    throw e;
  }
  return backend;
};
