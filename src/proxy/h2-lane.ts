// One tunnel's way to an HTTP/2 origin (docs/destinations.md#http2): the session every tunnel to that destination
// shares while this tunnel holds less than its share of it, else a session of the tunnel's own; and a session of its
// own too when the shared one is full and stalled streams hold a share of it, so clients that do not read never make
// another client's streams wait for a slot.

import type { H2Client } from '../http2/h2-client.js';

/**
 * The part of a shared upstream session's concurrent streams (SETTINGS_MAX_CONCURRENT_STREAMS) one tunnel may hold,
 * in percent; past it the tunnel's streams go on a session of its own. So do they when the session is full and as
 * many of its streams are paused by clients that do not read.
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
    const share = this.share();
    // A full session is waited for, as its streams end quickly, unless streams whose clients do not read hold a share.
    if (!shared.closed && this.onShared < share && (shared.room() > 0 || shared.held() < share)) {
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
