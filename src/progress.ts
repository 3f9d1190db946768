// The one progress bar: a line redrawn in place on a terminal (at most every 100 ms), nothing at all when the
// stream is not a TTY (a log file or a pipe gets no control characters). It counts items (detect's images:
// `[####----] 3/10 1.2 s NAME`) or bytes (a download: `NAME [####----] 45% 12.3/129.0 MB 5.1 MB/s`).

export interface ProgressStream {
  write(chunk: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface ProgressOptions {
  /** Items or bytes to reach; null when unknown (a download without a size). */
  total: number | null;
  unit: 'items' | 'bytes';
  /** Bytes: the file name in front of the bar. Items: the name of the last item goes after it instead. */
  label?: string;
  /** Already done before this bar started (a resumed download); not counted in the rate. */
  done?: number;
}

const WIDTH = 24;
const REDRAW_MS = 100;

export class ProgressBar {
  /** Drawn at all: a TTY, and (for items) more than one to count. */
  readonly enabled: boolean;
  readonly #stream: ProgressStream | null | undefined;
  readonly #o: ProgressOptions;
  readonly #start: number;
  readonly #t0 = performance.now();
  #done: number;
  #last = -Infinity;
  #drawn = false;
  #item = '';

  constructor(stream: ProgressStream | null | undefined, opts: ProgressOptions) {
    this.#stream = stream;
    this.#o = opts;
    this.#done = this.#start = opts.done ?? 0;
    this.enabled = stream?.isTTY === true && (opts.unit === 'bytes' || (opts.total ?? 0) > 1);
  }

  /** `n` more done (for items, the one just finished is `item`); redrawn unless drawn in the last 100 ms. */
  advance(n: number, item?: string): void {
    this.#done += n;
    if (item !== undefined) this.#item = item;
    if (!this.enabled) return;
    const now = performance.now();
    if (now - this.#last < REDRAW_MS) return;
    this.#last = now;
    this.#draw();
  }

  /** Erases the bar so that following lines start clean. */
  clear(): void {
    if (this.#drawn) this.#stream!.write('\r\x1b[2K');
    this.#drawn = false;
    this.#last = -Infinity;
  }

  /** Draws the final state and ends the line (the bar stays on screen). */
  finish(): void {
    if (!this.enabled) return;
    this.#draw();
    this.#stream!.write('\n');
    this.#drawn = false;
  }

  #bar(empty: string): string {
    const total = this.#o.total;
    const filled = total ? Math.min(WIDTH, Math.round((WIDTH * this.#done) / total)) : 0;
    return `[${'#'.repeat(filled)}${empty.repeat(WIDTH - filled)}]`;
  }

  #draw(): void {
    const secs = (performance.now() - this.#t0) / 1000;
    const { total, label } = this.#o;
    let line: string;
    if (this.#o.unit === 'items') {
      const head = `${this.#bar('-')} ${this.#done}/${total ?? '?'} ${secs.toFixed(1)} s `;
      const room = Math.max(40, this.#stream!.columns ?? 80) - head.length - 1;
      const name = this.#item.length > room ? `…${this.#item.slice(this.#item.length - room + 1)}` : this.#item;
      line = `${head}${name}`;
    } else {
      const mb = (b: number) => (b / 1e6).toFixed(1);
      const rate = (this.#done - this.#start) / Math.max(secs, 1e-3) / 1e6;
      const bar = total ? ` ${this.#bar('.')} ${Math.floor((100 * this.#done) / total)}%` : '';
      line = `${label ?? ''}${bar} ${mb(this.#done)}/${total ? mb(total) : '?'} MB ${rate.toFixed(1)} MB/s`;
    }
    this.#stream!.write(`\r\x1b[2K${line}`);
    this.#drawn = true;
  }
}
