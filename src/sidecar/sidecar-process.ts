// One spawned rfdetr-sidecar process: started with execa (in its own process group, in this session), its stderr kept as a
// short tail for error reports, its READY line read from stdout, and its exit turned into an error that says
// how it ended and what it last printed.
import { execa, type ResultPromise } from 'execa';
import { RfdetrError } from '../errors.ts';
import type { Logger } from './logger.ts';
import type { EnginePriority } from './backend.ts';

export interface ExitInfo {
  exitCode: number | undefined;
  signal: string | undefined;
}

export type ExitPhase = 'before it was ready' | 'while serving';

/** What the READY line carries that the supervisor uses. */
export interface ReadyLine {
  socket?: string;
  /** The `--nice` outcome (absent from a sidecar older than it). */
  nice?: EnginePriority;
}

export interface SidecarProcessOptions {
  file: string;
  args: string[];
  /** The complete environment of the child (nothing else is inherited). */
  env: Record<string, string | undefined>;
  stderrTailLines: number;
  logger: Logger;
  /** Fields added to every log line (the device label). */
  logFields: Record<string, unknown>;
}

export class SidecarProcess {
  readonly #child: ResultPromise;
  readonly #log: Logger;
  readonly #logFields: Record<string, unknown>;
  readonly #tail: string[] = [];
  #exitInfo: ExitInfo | undefined;
  /** Resolves with how the process ended (never rejects). */
  readonly exit: Promise<ExitInfo>;

  constructor(o: SidecarProcessOptions) {
    this.#log = o.logger;
    this.#logFields = o.logFields;
    this.#log.info('sidecar spawn', { file: o.file, args: o.args, ...o.logFields });
    this.#child = execa(o.file, o.args, {
      stdin: 'ignore', stdout: 'pipe', stderr: 'pipe', buffer: false, reject: false, env: o.env, extendEnv: false,
      // This process's session, a process group of its own: the sidecar calls setpgid itself
      // (--own-process-group, which the supervisor passes), so a terminal's Ctrl-C goes to the CLI, which then
      // closes the sidecar in order (otherwise the sidecar would stop on the same SIGINT and be restarted).
      // Not a session of its own (detached: setsid): with the kernel's autogroup scheduling each session gets
      // an even share of the CPU first, so a sidecar leading its own got one core of two against this process's
      // session under load, whatever the nice values (bench/README.md, "Fairness without privilege": the
      // legitimate client's p50 12.8 s in its own session, 5.7 s in this one). --exit-with-parent
      // (PR_SET_PDEATHSIG) still ends it if this process dies; execa's own cleanup stays off, as for a
      // detached child, so the supervisor's orderly close is the only one.
      detached: false,
      cleanup: false,
    });
    let partial = '';
    this.#child.stderr?.setEncoding('utf8');
    this.#child.stderr?.on('data', (d: string) => {
      const lines = (partial + d).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        if (!line) continue;
        this.#tail.push(line);
        if (this.#tail.length > o.stderrTailLines) this.#tail.shift();
        this.#log.debug(`sidecar: ${line}`, { pid: this.#child.pid, ...this.#logFields });
      }
    });
    this.exit = this.#child.then(
      (r) => ({ exitCode: r.exitCode, signal: r.signal }),
      (e: { exitCode?: number; signal?: string }) => ({ exitCode: e.exitCode, signal: e.signal }),
    ).then((info) => {
      if (partial) this.#tail.push(partial);
      this.#exitInfo = info;
      return info;
    });
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** How it ended, once it has. */
  get exitInfo(): ExitInfo | undefined {
    return this.#exitInfo;
  }

  get stderrTail(): string[] {
    return [...this.#tail];
  }

  kill(signal: NodeJS.Signals): void {
    this.#child.kill(signal);
  }

  /** The death as an error: how it ended, when, and its last stderr lines. */
  exitError(exit: ExitInfo, when: ExitPhase): RfdetrError {
    const how = exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.exitCode}`;
    const tail = this.#tail.slice(-5).join(' | ');
    return new RfdetrError('E_SIDECAR_EXITED', `the sidecar (pid ${this.pid}) ${how} ${when}${tail ? `; its last stderr: ${tail}` : ''}`, {
      exitCode: exit.exitCode, signal: exit.signal, pid: this.pid, stderrTail: this.stderrTail, phase: when === 'while serving' ? 'serving' : 'startup',
    });
  }

  /** Resolves with the READY line's fields; rejects when the process exits first or prints none in time (then it is killed). */
  waitReady(timeoutMs: number): Promise<ReadyLine> {
    const stdout = this.#child.stdout;
    return new Promise((resolve, reject) => {
      let buf = '';
      let done = false;
      const finish = (f: () => void) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        stdout?.off('data', onData);
        f();
      };
      const timer = setTimeout(() => finish(() => {
        this.kill('SIGKILL');
        const tail = this.#tail.slice(-5).join(' | ');
        reject(new RfdetrError('E_SIDECAR_EXITED',
          `the sidecar printed no READY line within ${timeoutMs} ms; killed it` +
          `${tail ? `; its last stderr: ${tail}` : ''}. Raise startupTimeoutMs if loading is this slow.`,
          { reason: 'startup-timeout', stderrTail: this.stderrTail }));
      }), timeoutMs);
      const onData = (d: Buffer | string) => {
        buf += d.toString();
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (!line.startsWith('READY ')) {
            this.#log.warn('sidecar wrote to stdout before READY (ignored)', { line, ...this.#logFields });
            continue;
          }
          let ready: ReadyLine;
          try {
            ready = JSON.parse(line.slice(6)) as ReadyLine;
          } catch {
            finish(() => reject(new RfdetrError('E_PROTOCOL', `the sidecar's READY line is not JSON: ${line.slice(0, 200)}`)));
            return;
          }
          this.#log.info('sidecar READY', { ...(ready as Record<string, unknown>), ...this.#logFields });
          finish(() => resolve(ready));
          return;
        }
      };
      stdout?.on('data', onData);
      void this.exit.then((info) => finish(() => reject(this.exitError(info, 'before it was ready'))));
    });
  }
}
