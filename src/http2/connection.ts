// What both ends of boundary's HTTP/2 do alike on a connection (RFC 9113 §4-6): the frame dispatch and its two
// connection-wide rules (nothing inside a header block, SETTINGS first), PING answered under its flood budget,
// PRIORITY checked and otherwise ignored (no priority tree is kept), WINDOW_UPDATE read and the connection window
// grown, padding taken off. The workload-facing server (server-session.ts) and the upstream client (h2-session.ts)
// supply what differs: their streams, SETTINGS, GOAWAY, resets and how an error ends the connection.

import { createFloodGuard, type FloodGuard, type FloodKind } from './flood-guard.js';
import type { BodySender, FlowStream } from './flow-control.js';
import type { FrameWriter } from './frame-writer.js';
import { Flag, FrameType, frame, H2_MAX_31_BIT, H2Error, type PeerSettings, unpad } from './frames.js';
import type { HeaderBlocks } from './header-blocks.js';

export abstract class H2Connection {
  /** The peer's first SETTINGS arrived. */
  protected gotSettings = false;
  protected readonly guard: FloodGuard = createFloodGuard();
  /** Who is at the other end, for the reasons a GOAWAY carries. */
  protected abstract readonly peer: 'client' | 'origin';
  protected abstract readonly blocks: HeaderBlocks;
  protected abstract readonly out: FrameWriter;
  /** This end's bodies under the peer's windows. */
  protected abstract readonly body: BodySender;

  /** The streams open now, whose bodies may go when a window grows. */
  protected abstract openStreams(): Iterable<FlowStream>;
  /** A connection error (RFC 9113 §5.4.1): GOAWAY, every stream ends, the socket ends. */
  protected abstract fail(code: number, message: string): undefined;
  /** A flood budget answered: true when it was spent (the connection is closing). */
  protected abstract flood(kind: FloodKind | undefined): boolean;
  protected abstract onData(flags: number, id: number, payload: Buffer): undefined;
  protected abstract onHeaders(flags: number, id: number, payload: Buffer): undefined;
  protected abstract onReset(id: number, payload: Buffer): undefined;
  protected abstract onSettings(flags: number, id: number, payload: Buffer): undefined;
  protected abstract onGoaway(id: number, payload: Buffer): undefined;
  /** WINDOW_UPDATE on a stream (not 0), of the right size; the increment may be 0 (a stream error). */
  protected abstract onStreamWindow(id: number, increment: number): undefined;

  protected onFrame(type: number, flags: number, id: number, payload: Buffer): undefined {
    if (this.blocks.open && type !== FrameType.CONTINUATION) return this.fail(H2Error.PROTOCOL_ERROR, 'a frame inside a header block');
    if (!this.gotSettings && (type !== FrameType.SETTINGS || (flags & Flag.ACK) !== 0)) return this.fail(H2Error.PROTOCOL_ERROR, `the ${this.peer} did not start with SETTINGS`);
    switch (type) {
      case FrameType.DATA:
        return this.onData(flags, id, payload);
      case FrameType.HEADERS:
        return this.onHeaders(flags, id, payload);
      case FrameType.CONTINUATION:
        return this.blocks.continuation(id, (flags & Flag.END_HEADERS) !== 0, payload);
      case FrameType.RST_STREAM:
        return this.onReset(id, payload);
      case FrameType.SETTINGS:
        return this.onSettings(flags, id, payload);
      case FrameType.PING:
        return this.onPing(flags, id, payload);
      case FrameType.GOAWAY:
        return this.onGoaway(id, payload);
      case FrameType.WINDOW_UPDATE:
        return this.onWindowUpdate(id, payload);
      case FrameType.PRIORITY:
        if (id === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'PRIORITY on stream 0');
        if (payload.length !== 5) return this.fail(H2Error.FRAME_SIZE_ERROR, 'PRIORITY of the wrong size');
        return this.checkPriority(id, payload, 0);
      case FrameType.PUSH_PROMISE:
        // Push is never on: boundary's client sends SETTINGS_ENABLE_PUSH 0, and a client may not push at all.
        return this.fail(H2Error.PROTOCOL_ERROR, `PUSH_PROMISE from the ${this.peer}`);
      default:
        // RFC 9113 §5.5: unknown frame types are ignored.
        return;
    }
  }

  /** RFC 9113 §5.3.1: a stream cannot depend on itself; nothing else of a priority is read. */
  protected checkPriority(id: number, payload: Buffer, at: number): undefined {
    if ((payload.readUInt32BE(at) & H2_MAX_31_BIT) !== id) return;
    return this.fail(H2Error.PROTOCOL_ERROR, 'a stream that depends on itself');
  }

  /** The payload without padding and priority fields, or undefined after failing the connection. */
  protected unpadded(flags: number, payload: Buffer, priority: boolean): Buffer | undefined {
    const out = unpad(flags, payload, priority);
    if (!Array.isArray(out)) return out;
    this.fail(out[0], out[1]);
    return undefined;
  }

  /**
   * What a peer's SETTINGS change for every end alike: a table size update owed, each open stream's send window moved
   * by the change of the initial window (RFC 9113 §6.9.2), then the ACK and the bodies that may go now. `initial` is
   * the peer's initial window so far; returns the new one, or undefined after failing the connection.
   */
  protected applySettings(settings: PeerSettings, initial: number): number | undefined {
    if (settings.headerTable === true) this.out.tableSizeUpdate = true;
    const next = settings.initialWindow ?? initial;
    if (next !== initial) {
      for (const stream of this.openStreams()) {
        stream.sendWindow += next - initial;
        if (stream.sendWindow > H2_MAX_31_BIT) return this.fail(H2Error.FLOW_CONTROL_ERROR, 'a stream window past 2^31-1');
      }
    }
    this.out.send(frame(FrameType.SETTINGS, Flag.ACK, 0));
    this.flushBodies();
    return next;
  }

  /** A window grew or the socket drained: every open stream with something to send tries again. */
  protected flushBodies(): void {
    this.body.flushAll(this.openStreams());
  }

  private onPing(flags: number, id: number, payload: Buffer): undefined {
    if (id !== 0) return this.fail(H2Error.PROTOCOL_ERROR, 'PING on a stream');
    if (payload.length !== 8) return this.fail(H2Error.FRAME_SIZE_ERROR, 'PING of the wrong size');
    if ((flags & Flag.ACK) !== 0 || this.flood(this.guard.ping())) return;
    this.out.send(frame(FrameType.PING, Flag.ACK, 0, payload));
  }

  private onWindowUpdate(id: number, payload: Buffer): undefined {
    if (payload.length !== 4) return this.fail(H2Error.FRAME_SIZE_ERROR, 'WINDOW_UPDATE of the wrong size');
    const increment = payload.readUInt32BE(0) & H2_MAX_31_BIT;
    if (id !== 0) return this.onStreamWindow(id, increment);
    if (increment === 0) return this.fail(H2Error.PROTOCOL_ERROR, 'a zero WINDOW_UPDATE');
    this.body.window += increment;
    if (this.body.window > H2_MAX_31_BIT) return this.fail(H2Error.FLOW_CONTROL_ERROR, 'the connection window past 2^31-1');
    this.flushBodies();
  }
}
