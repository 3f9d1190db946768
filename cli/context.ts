// What a command needs from the outside world, injectable so tests can run the program in process: output
// streams, stdin, environment, and the factory that opens an inference backend.
import type { Logger } from '../src/log.ts';
import type { InferenceBackend } from '../src/sidecar/backend.ts';

export interface BackendRequest {
  /** Engine name (`--engine`): cpu, tt, tt-host, … — whatever the sidecar offers. */
  engine: string;
  /** Directory with model.safetensors + config.json. */
  weightsDir: string;
  /** CPU threads, 0 = physical cores. */
  threads?: number | undefined;
  /** `--precision`: one the engine runs (checked against `--list-engines`); absent: the engine's default. */
  precision?: string | undefined;
  /** The sidecar's `--nice` (-20..0): its priority raised at start where permitted; 0 / absent = as started. */
  nice?: number | undefined;
  /** The sidecar's `--load-nice` (0..19): its load and warm-up at that nice, then back to `nice` (a model swapped in). */
  loadNice?: number | undefined;
  /** Connect to an externally supervised sidecar at this socket instead of spawning one. */
  socketPath?: string | undefined;
  /** Warnings and errors, one line each (stderr). */
  log: (line: string) => void;
  /** Structured lifecycle log (serve passes its JSON logger); when absent only warnings/errors reach `log`. */
  logger?: Logger | undefined;
  /**
   * Several sidecars behind one backend (serve's --devices / --workers): one per member, each adding its
   * environment; ready while at least `minReady` are. Absent: one sidecar.
   */
  pool?: { members: { label: string; env: Record<string, string>; threads?: number }[]; minReady: number } | undefined;
  /** Resolve only once the backend is ready (default true); serve passes false and lets probes say "starting". */
  waitReady?: boolean | undefined;
}

/** Opens a backend and resolves once it is ready to infer (or rejects with what failed). */
export type BackendFactory = (req: BackendRequest) => Promise<InferenceBackend>;

export interface WritableLike {
  write(chunk: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface CliContext {
  stdout: WritableLike;
  stderr: WritableLike;
  /** Read all of stdin (for the `-` input). */
  readStdin: () => Promise<Buffer>;
  /** stdin as a stream, for commands that handle input as it arrives (`rfdetr track -`); readStdin otherwise. */
  stdin?: NodeJS.ReadableStream & AsyncIterable<Buffer | string>;
  env: NodeJS.ProcessEnv;
  cwd: string;
  openBackend: BackendFactory;
}

/** One line on the command's stderr: warnings, progress steps, errors. */
export function stderrLine(ctx: CliContext): (line: string) => void {
  return (line: string) => void ctx.stderr.write(`${line}\n`);
}
