// The server's log: JSON lines through the package's one Logger (src/log.ts), one line per request and exactly
// one READY_MESSAGE line when serving begins.
export { createJsonLogger, isLogLevel, LOG_LEVELS, type Logger, type LogLevel } from '../log.ts';

/**
 * The text of the one line logged when the server starts serving (listening and the engine ready). It contains
 * uvicorn's "Application startup complete", the line tt-model's tt-dit-server kind waits for (tt-model.yaml's
 * runtime.app execs `rfdetr serve` in uvicorn's place).
 */
export const READY_MESSAGE = 'rfdetr-serve ready: Application startup complete';
