// A one-line progress bar on stderr, drawn only when stderr is a TTY (a log file or a pipe gets no control
// characters); the closing summary line is printed either way by the caller.
import type { WritableLike } from './context.ts';

export class ProgressBar {
  readonly enabled: boolean;
  #done = 0;
  #drawn = false;
  readonly #t0 = performance.now();

  constructor(readonly stream: WritableLike, readonly total: number) {
    this.enabled = stream.isTTY === true && total > 1;
  }

  /** Marks one more item done (named `label`) and redraws. */
  tick(label: string): void {
    this.#done++;
    if (!this.enabled) return;
    const cols = Math.max(40, this.stream.columns ?? 80);
    const width = 24;
    const filled = Math.round((this.#done / this.total) * width);
    const head = `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${this.#done}/${this.total} ${((performance.now() - this.#t0) / 1000).toFixed(1)} s `;
    const room = cols - head.length - 1;
    const name = label.length > room ? `…${label.slice(label.length - room + 1)}` : label;
    this.stream.write(`\r\x1b[2K${head}${name}`);
    this.#drawn = true;
  }

  /** Clears the bar so that following lines start clean. */
  clear(): void {
    if (this.#drawn) this.stream.write('\r\x1b[2K');
    this.#drawn = false;
  }
}
