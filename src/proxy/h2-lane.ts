// One tunnel's way to an HTTP/2 origin (docs/destinations.md#http2): the session every tunnel to that destination
// shares while this tunnel holds less than its share of it and it has a slot free, else a session of the tunnel's
// own, so that one client's streams (stalled ones above all) never make another client's wait for a slot.

import type { H2Client } from '../http2/h2-client.js';

/**
 * The part of a shared upstream session's concurrent streams (SETTINGS_MAX_CONCURRENT_STREAMS) one tunnel may hold,
 * in percent; past it, or when the session has no slot free, the tunnel's streams go on a session of its own.
 */
export const H2_UPSTREAM_TUNNEL_SHARE_PERCENT = 50;

export class H2Lane {
  /** This tunnel's streams on the shared client, from pick() to done(). */
  private onShared = 0;
  private own: H2Client | undefined = undefined;
  private released = false;
  private readonly shared: H2Client;
  private readonly openOwn: () => H2Client;

  /** `openOwn`: a client of the tunnel's own to the same destination, made on first need. */
  constructor(shared: H2Client, openOwn: () => H2Client) {
    this.shared = shared;
    this.openOwn = openOwn;
  }

  /** The client for the tunnel's next stream; done() is owed for it once the stream has ended. */
  pick(): H2Client {
    const shared = this.shared;
    if (this.released) return shared;
    if (!shared.closed && this.onShared < this.share() && shared.room() > 0) {
      this.onShared++;
      return shared;
    }
    this.own ??= this.openOwn();
    return this.own;
  }

  /** A stream picked on `client` has ended: its slot no longer counts against the tunnel. */
  done(client: H2Client): void {
    if (client === this.shared) this.onShared--;
  }

  /** The tunnel has closed: its own client goes with it (the shared one serves other tunnels). */
  release(): H2Client | undefined {
    this.released = true;
    const own = this.own;
    this.own = undefined;
    own?.destroy();
    return own;
  }

  private share(): number {
    return Math.max(1, Math.floor((this.shared.capacity() * H2_UPSTREAM_TUNNEL_SHARE_PERCENT) / 100));
  }
}
