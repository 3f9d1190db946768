// One slow step of a command (starting the engine: loading the weights, warm-up), told on stderr: on a TTY a
// line redrawn in place with the elapsed time, then the closing line; elsewhere (a log file, a pipe) one plain
// line when it starts and one when it ends, no control characters.
import type { WritableLike } from './context.ts';

const REDRAW_MS = 200;

export class Stage {
  readonly #out: WritableLike;
  readonly #what: string;
  readonly #tty: boolean;
  readonly #t0 = performance.now();
  #timer: NodeJS.Timeout | undefined;

  /** Starts telling `what` (e.g. "detect: starting the cpu engine (loading the weights, warm-up)"). */
  constructor(out: WritableLike, what: string) {
    this.#out = out;
    this.#what = what;
    this.#tty = out.isTTY === true;
    if (this.#tty) {
      this.#draw();
      this.#timer = setInterval(() => this.#draw(), REDRAW_MS);
      this.#timer.unref();
    } else {
      out.write(`${what} …\n`);
    }
  }

  get elapsedS(): number {
    return (performance.now() - this.#t0) / 1000;
  }

  #draw(): void {
    this.#out.write(`\r\x1b[2K${this.#what} … ${this.elapsedS.toFixed(1)} s`);
  }

  /** Ends the step with `result` (e.g. "ready"), naming the time it took. */
  done(result: string): void {
    this.#end(`${this.#what}: ${result} in ${this.elapsedS.toFixed(1)} s`);
  }

  /** Ends the step as failed; the caller reports the error itself. */
  fail(): void {
    this.#end(`${this.#what}: failed after ${this.elapsedS.toFixed(1)} s`);
  }

  #end(line: string): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#out.write(this.#tty ? `\r\x1b[2K${line}\n` : `${line}\n`);
  }
}

/** Runs `fn` as a told stage. */
export async function stage<T>(out: WritableLike, what: string, fn: () => Promise<T>, result: (v: T) => string = () => 'done'): Promise<T> {
  const s = new Stage(out, what);
  try {
    const v = await fn();
    s.done(result(v));
    return v;
  } catch (e) {
    s.fail();
    throw e;
  }
}
