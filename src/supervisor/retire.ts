// Ends a live session because the same instance attached again, here or on another replica. When the old
// session is another process (other boot id) that is still open and had acked, two live boundaries share one
// identity and would supersede each other forever: the old one is told `superseded` and stops competing. A
// restarted process also brings a new boot id, but its old session is closed (or never acked) by then.

import type { ServerHttp2Session } from 'node:http2';
import type { LiveSession, SupervisorContext } from './context.js';
import { endSession } from './push.js';
import type { SupersededSession } from './tables.js';

interface Newcomer {
  readonly bootId: string;
  /** Where it came from, for the log and the push: a remote address, or the replica that admitted it. */
  readonly from: string;
  /** The newcomer's own HTTP/2 session when it attached here (it may be the same connection). */
  readonly h2session?: ServerHttp2Session;
}

export function retireSession(ctx: SupervisorContext, previous: LiveSession, superseded: Omit<SupersededSession, 'sessionId'>, newcomer: Newcomer): void {
  const { sandboxId, instanceId } = previous;
  const { bootId, from, h2session } = newcomer;
  const alive = previous.session !== h2session && !previous.session.closed && !previous.session.destroyed;
  if (superseded.bootId !== bootId && superseded.acked && alive) {
    ctx.logger.warn(
      { sandboxId, instanceId, bootId, remote: from, supersededBootId: superseded.bootId, supersededRemote: previous.remote },
      'two live boundary processes attached as one instance: the newer wins, the older is told it is superseded and stops re-attaching; give each a unique --instance-id or stop the duplicate',
    );
    const reason = `another boundary process (boot ${bootId}, from ${from}) attached as sandbox ${sandboxId} instance ${instanceId}`;
    endSession(ctx, previous, { kind: 'withdraw', code: 'superseded', bootId, reason }, h2session);
    ctx.emit({ type: 'superseded', sandboxId, instanceId, detail: `boot ${superseded.bootId} superseded by boot ${bootId}` });
  } else {
    endSession(ctx, previous, { kind: 'withdraw', code: 'replaced', reason: 'superseded by a newer session of the same instance' }, h2session);
  }
}
