// The one fair share of engine time across every model a server serves (DESIGN.md: several models behind one
// admission, one memory budget and one fair share). Each model has its own engine queue and sidecar, but on the
// cpu engine every sidecar runs on the same cores, so a forward on model A takes time from the forwards on model
// B: a client's engine time is counted on one clock per client whichever queue it was spent in, a client is
// active while it has work in any queue, and "served longest ago" (the tie-break) counts turns on every queue.
// The engine queues hold a FairShare; a queue made alone gets its own, which is one model's share as before.
import { VirtualTime } from './virtual-time.ts';

export class FairShare {
  readonly #clock = new VirtualTime();
  /** Per client: its jobs waiting or in flight, over every queue sharing this. */
  readonly #work = new Map<string, number>();
  readonly #lastServed = new Map<string, number>();
  #turns = 0;

  /** `client`'s engine time so far, ms (virtual-time.ts). */
  of(client: string): number {
    return this.#clock.of(client);
  }

  /** Whether `client` has work waiting or in flight in any queue. */
  active(client: string): boolean {
    return this.#work.has(client);
  }

  /** Advances `client`'s clock by `ms` (negative: the correction of an estimate). */
  charge(client: string, ms: number): void {
    this.#clock.charge(client, ms);
  }

  /** A job of `client`'s entered a queue: a client with no other work joins the share level with the others. */
  arrive(client: string): void {
    const n = this.#work.get(client);
    if (n === undefined) this.#clock.activate(client, this.#work.keys());
    this.#work.set(client, (n ?? 0) + 1);
  }

  /** A job of `client`'s left its queue (answered, dropped or rejected): with none left the client goes idle. */
  leave(client: string): void {
    const n = (this.#work.get(client) ?? 1) - 1;
    if (n > 0) return void this.#work.set(client, n);
    this.#work.delete(client);
    this.#clock.idle(client, this.#work.keys());
  }

  /** `client` was handed a forward (on any queue): it now ranks after every client served before this turn. */
  served(client: string): void {
    this.#lastServed.set(client, ++this.#turns);
    // Turn order only matters among clients seen recently: forget idle ones before the map grows without bound.
    if (this.#lastServed.size > 4096) for (const c of this.#lastServed.keys()) if (!this.#work.has(c)) this.#lastServed.delete(c);
  }

  /** The turn `client` was last served on (0: never, or long ago). */
  lastServed(client: string): number {
    return this.#lastServed.get(client) ?? 0;
  }
}
