// Answers written on an HTTP/2 stream: a denial as the same 403 JSON body as HTTP/1.1 (deny.ts), or for a gRPC call
// gRPC's trailers-only form (HTTP 200, grpc-status, grpc-message naming the policy and reason); RST_STREAM where no
// answer can be sent any more. Shapes only; never decides anything.

import { POLICY_HEADER } from '../http1/headers.js';
import { H2Error } from '../http2/frames.js';
import { grpcStatusOf, grpcTrailersOnly } from '../http2/grpc.js';
import type { RequestStream } from '../http2/request-stream.js';
import type { Denial } from '../chain/denials.js';

const POLICY_FIELD = POLICY_HEADER.toLowerCase();

/** What a gRPC client shows for a denial: the status line's why, then the error, policy, reason and path. */
function grpcDenialMessage(d: Denial): string {
  // A JSON-RPC batch denial's body is an array of errors; its first one says why.
  const body = (Array.isArray(d.body) ? d.body[0] : d.body) as Readonly<Record<string, unknown>> | undefined;
  const field = (name: string): string | undefined => {
    const v = body?.[name];
    return typeof v === 'string' ? v : undefined;
  };
  const parts = [`error ${d.error}`];
  const policy = field('policy') ?? d.policy;
  if (policy !== undefined) parts.push(`policy ${policy}`);
  const reason = field('reason');
  if (reason !== undefined) parts.push(`reason ${reason}`);
  const path = field('path');
  if (path !== undefined) parts.push(`path ${path}`);
  return `boundary: ${d.reasonPhrase} (${parts.join(', ')})`;
}

export function respondDenial(stream: RequestStream, d: Denial, grpc: boolean, peer?: string): void {
  if (stream.destroyed) return;
  if (stream.headersSent) {
    stream.reset(H2Error.INTERNAL_ERROR);
    return;
  }
  if (grpc) {
    stream.respond(grpcTrailersOnly(grpcStatusOf(d.status), grpcDenialMessage(d)), true);
  } else {
    const body = Buffer.from(JSON.stringify(d.body), 'utf8');
    const fields = [':status', String(d.status), 'content-type', 'application/json', 'content-length', String(body.length)];
    if (d.policy !== undefined) fields.push(POLICY_FIELD, d.policy);
    if (d.policy !== undefined && peer !== undefined) fields.push(peer.toLowerCase(), d.policy);
    if (d.allow !== undefined) fields.push('allow', d.allow);
    stream.respond(fields, false);
    stream.write(body);
    stream.end();
  }
  stream.stopUpload();
}

/** A bare status (400 for a malformed request, 502 when nothing was sent): no body, as on HTTP/1.1. */
export function respondStatus(stream: RequestStream, status: number, grpc: boolean, why: string): void {
  if (stream.destroyed) return;
  if (stream.headersSent) {
    stream.reset(H2Error.INTERNAL_ERROR);
    return;
  }
  stream.respond(grpc ? grpcTrailersOnly(grpcStatusOf(status), `boundary: ${why}`) : [':status', String(status), 'content-length', '0'], true);
  stream.stopUpload();
}
