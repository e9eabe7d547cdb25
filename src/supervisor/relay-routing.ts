// Routes an operator's relay request from the admin listener to the most recently attached instance of the sandbox
// and pushes it the dial-back; the byte pumping itself is relays.ts's.

import type { Duplex } from 'node:stream';
import type { RelayRequest } from './admin.js';
import type { SupervisorContext } from './context.js';
import { pushMessage } from './push.js';
import { relayErrorReply } from './relays.js';

export function createRelayOpener(ctx: SupervisorContext): (request: RelayRequest, client: Duplex, head: Buffer) => undefined {
  const { live, broker } = ctx;
  return function openRelay(request, client, head) {
    const { sandboxId, instanceId: wanted, target, style } = request;
    const fail = (status: number, error: string, message: string): undefined => {
      client.end(relayErrorReply(style, status, error, message));
    };
    // Map order is attach order, so the last match is the most recently attached instance.
    const candidates = [...live.values()].filter((s) => s.sandboxId === sandboxId && s.watch !== undefined && (wanted === undefined || s.instanceId === wanted));
    const session = candidates.at(-1);
    if (session === undefined) return fail(404, 'not-attached', `no attached instance of sandbox ${sandboxId}${wanted === undefined ? '' : ` named ${wanted}`}`);
    const opened = broker.open({ sandboxId, instanceId: session.instanceId, sessionId: session.sessionId, target, style, client, head });
    if (!opened.ok) return fail(opened.status, 'relay-unavailable', opened.message);
    if (!pushMessage(ctx, session, opened.push)) {
      broker.closeInstance(sandboxId, session.instanceId);
      fail(502, 'push-failed', 'could not reach the boundary');
    }
  };
}
