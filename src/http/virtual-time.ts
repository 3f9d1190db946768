// Per-client virtual time for a cost-aware fair share (start-time fair queuing): each client's clock advances
// by the service its work actually cost (ms of engine occupancy), and the next turn goes to the waiting client
// whose clock is least. Counting turns is not enough when one client's image costs several times another's:
// under the red-team attack (bench/redteam) a 640×480 image's forward took ~0.65 s while an 8192² image held the
// cpu engine for its ~0.5 s forward plus 0.6–4.9 s moving its 200 MB frame, so taking turns left a client
// sending one small image a second a backlog that grew by the second. A client that becomes active again
// starts at the least clock among the clients with work (or where the last of them stood), never behind it:
// time spent idle banks no credit.
export class VirtualTime {
  readonly #clock = new Map<string, number>();
  /** The least clock among the active clients when it was last computed; it never goes back. */
  #floor = 0;

  /** `client`'s clock (a client never seen stands at the floor). */
  of(client: string): number {
    return this.#clock.get(client) ?? this.#floor;
  }

  /**
   * `client` has work again: its clock moves up to the least clock among `active` (the other clients with
   * work), or to the floor when none has.
   */
  activate(client: string, active: Iterable<string>): void {
    this.#raiseFloor(client, active, this.#floor);
    this.#clock.set(client, Math.max(this.of(client), this.#floor));
  }

  /** Advances `client`'s clock by `ms` (negative: a correction of an earlier estimate). */
  charge(client: string, ms: number): void {
    this.#clock.set(client, this.of(client) + ms);
  }

  /**
   * `client` has no work left (`active`: the clients that still have). Its clock is kept while it is ahead of the floor (it comes back no earlier than
   * it left); a clock at or behind the floor says nothing a missing one does not, so it is dropped, which
   * bounds the map by the clients that were served more than the others recently.
   */
  idle(client: string, active: Iterable<string>): void {
    this.#raiseFloor(client, active, this.of(client));
    if (this.of(client) <= this.#floor) this.#clock.delete(client);
    if (this.#clock.size > 4096) for (const [c, t] of this.#clock) if (t <= this.#floor) this.#clock.delete(c);
  }

  /** The floor rises to the least clock among `active` but `client`, or to `alone` when no other is active. */
  #raiseFloor(client: string, active: Iterable<string>, alone: number): void {
    let least = Infinity;
    for (const c of active) if (c !== client) least = Math.min(least, this.of(c));
    this.#floor = Math.max(this.#floor, least === Infinity ? alone : least);
  }
}
