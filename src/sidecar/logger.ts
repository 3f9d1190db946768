// The sidecar modules' logger is the package's one Logger (src/log.ts): serve passes its JSON logger, one-shot
// commands show only warnings and errors.
export { silentLogger, type Logger } from '../log.ts';
