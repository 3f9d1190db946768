// The one Logger of the package: the server's JSON lines, the supervisor's lifecycle lines and the CLI's
// stderr warnings all go through it. `log(level, …)` takes a level decided at run time (a status code, a
// state); `debug`/`info`/`warn`/`error` are its shorthands. Lines below the logger's level are dropped.

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export type LineLevel = Exclude<LogLevel, 'silent'>;
export type LogFields = Record<string, unknown>;

export interface Logger {
  readonly level: LogLevel;
  log(level: LineLevel, msg: string, fields?: LogFields): void;
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

export function isLogLevel(s: unknown): s is LogLevel {
  return typeof s === 'string' && (LOG_LEVELS as readonly string[]).includes(s);
}

/** A logger handing every line at or above `level` to `write`. */
export function createLogger(level: LogLevel, write: (level: LineLevel, msg: string, fields: LogFields | undefined) => void): Logger {
  if (!isLogLevel(level)) throw new RangeError(`Expected one of ${LOG_LEVELS.join(', ')} for log level but received ${JSON.stringify(level)}`);
  const log = (lv: LineLevel, msg: string, fields?: LogFields) => {
    if (RANK[lv] >= RANK[level]) write(lv, msg, fields);
  };
  return {
    level, log,
    debug: (m, f) => log('debug', m, f),
    info: (m, f) => log('info', m, f),
    warn: (m, f) => log('warn', m, f),
    error: (m, f) => log('error', m, f),
  };
}

/** A logger writing one JSON object per line, {"time","level","msg",...fields}, through `write` (default: stderr). */
export function createJsonLogger(level: LogLevel = 'info', write: (line: string) => void = (l) => process.stderr.write(l)): Logger {
  return createLogger(level, (lv, msg, fields) => write(JSON.stringify({ time: new Date().toISOString(), level: lv, msg, ...fields }) + '\n'));
}

/** `logger` with `fields` added to every line (e.g. `{component: 'sidecar'}`). */
export function withFields(logger: Logger, fields: LogFields): Logger {
  return createLogger(logger.level, (lv, msg, f) => logger.log(lv, msg, { ...fields, ...f }));
}

export const silentLogger: Logger = createLogger('silent', () => {});
