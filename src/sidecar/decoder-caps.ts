// Which image files one connection's sidecar decodes itself (PROTOCOL.md, "Images the sidecar decodes"):
// asked once (`decoders`), lazily, on the first image that could go as a file; until the answer is in, and
// for an older sidecar (E_UNKNOWN_OP) or after any failure of the question, none.
import type { WireMessage } from '../protocol/codec.ts';

/**
 * Whether image files may go to the sidecar to decode, when it says it decodes their format.
 * RFDETR_SIDECAR_DECODE=off: never; the server decodes every image itself.
 */
export function sidecarDecodeEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return (env.RFDETR_SIDECAR_DECODE ?? '').toLowerCase() !== 'off';
}

const NONE: ReadonlySet<string> = new Set();

export class DecoderCaps {
  readonly #ask: () => Promise<WireMessage>;
  readonly #closing: () => boolean;
  readonly #on = sidecarDecodeEnabled();
  /** The formats the sidecar said it decodes; undefined until it has answered. */
  #formats: ReadonlySet<string> | undefined;
  #asked: Promise<void> | undefined;

  /** `ask` sends the decoders op and resolves with the reply; `closing` says the connection is going away. */
  constructor(ask: () => Promise<WireMessage>, closing: () => boolean) {
    this.#ask = ask;
    this.#closing = closing;
  }

  /**
   * Whether an image file of `format` may be sent as `{ encoded }`: the sidecar said it decodes it. The first
   * call asks in the background and answers false, as every call does until the reply is in.
   */
  decodes(format: 'jpeg' | 'png'): boolean {
    if (!this.#on || this.#closing()) return false;
    if (!this.#asked) void this.known();
    return this.#formats?.has(format) ?? false;
  }

  /** Resolves once decodes() has its answer (asking now if nobody has yet); never rejects. */
  known(): Promise<void> {
    if (!this.#on) {
      this.#formats = NONE;
      return Promise.resolve();
    }
    this.#asked ??= this.#ask().then(
      (m) => {
        this.#formats = m.kind === 'reply' && m.decoders ? new Set(m.decoders) : NONE;
      },
      () => {
        this.#formats = NONE;
      },
    );
    return this.#asked;
  }

  /** Why decodes(format) is false, for the error that refuses such a file. */
  whyNot(): string {
    if (!this.#on) return 'RFDETR_SIDECAR_DECODE=off';
    if (!this.#formats) return 'it has not yet said which formats it decodes';
    return `it decodes ${this.#formats.size ? [...this.#formats].join(', ') : 'none'}`;
  }
}
