// One JSON object per line: {"time","level","msg",...fields}. The server writes one line per request and
// exactly one READY_MESSAGE line when serving begins.

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * The text of the one line logged when the server starts serving (listening and the engine ready). It contains
 * uvicorn's "Application startup complete", the line tt-model's tt-dit-server kind waits for (tt-model.yaml's
 * runtime.app execs `rfdetr serve` in uvicorn's place).
 */
export const READY_MESSAGE = 'rfdetr-serve ready: Application startup complete';

export interface Logger {
  readonly level: LogLevel;
  log(level: Exclude<LogLevel, 'silent'>, msg: string, fields?: Record<string, unknown>): void;
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export function isLogLevel(s: unknown): s is LogLevel {
  return typeof s === 'string' && (LOG_LEVELS as readonly string[]).includes(s);
}

/** A logger writing JSON lines through `write` (default: stderr), dropping lines below `level`. */
export function createJsonLogger(level: LogLevel = 'info', write: (line: string) => void = (l) => process.stderr.write(l)): Logger {
  if (!isLogLevel(level)) throw new RangeError(`Expected one of ${LOG_LEVELS.join(', ')} for log level but received ${JSON.stringify(level)}`);
  return {
    level,
    log(lv, msg, fields) {
      if (RANK[lv] < RANK[level]) return;
      write(JSON.stringify({ time: new Date().toISOString(), level: lv, msg, ...fields }) + '\n');
    },
  };
}
