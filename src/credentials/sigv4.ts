// AWS SigV4 re-signing for `credential_signing` endpoints (docs/credentials.md#sigv4-signing): the region, the
// payload mode, the provider's keys from the endpoint-scoped resolver, and @smithy/signature-v4 (the AWS SDK's own
// signer). Never logs a key; a refusal is a value with a closed reason. No sockets.

import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { regionFromHost } from '../net/aws-region.js';
import type { CredentialSigning } from '../policy/types.js';
import { type RewriteRefusal, refuse } from './outcome.js';
import type { CredentialScope } from './scope.js';

/** The signer, loaded on the first signed request: a boundary without signing endpoints never pays for it. */
let signing: { Hash: typeof import('@smithy/hash-node').Hash; SignatureV4: typeof import('@smithy/signature-v4').SignatureV4 } | undefined;
function smithy(): NonNullable<typeof signing> {
  if (signing === undefined) {
    const load = createRequire(import.meta.url);
    signing = {
      Hash: (load('@smithy/hash-node') as typeof import('@smithy/hash-node')).Hash,
      SignatureV4: (load('@smithy/signature-v4') as typeof import('@smithy/signature-v4')).SignatureV4,
    };
  }
  return signing;
}

/** OpenShell's SignBody buffer: a body whose hash is signed is held whole, and no larger than this. */
export const MAX_SIGNED_BODY_BYTES = 10 * 1_048_576;

/** What the workload sent for its own (placeholder-key) signature: dropped before the rewrite and re-made here. */
export const AWS_AUTH_HEADERS: ReadonlySet<string> = new Set(['authorization', 'x-amz-date', 'x-amz-security-token', 'x-amz-content-sha256']);

/** Forwarded but never signed (OpenShell's list): proxies and SDK retries may change them. */
const UNSIGNED_HEADERS: ReadonlySet<string> = new Set(['accept-encoding', 'amz-sdk-invocation-id', 'amz-sdk-request', 'user-agent']);

const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';
const STREAMING_UNSIGNED_TRAILER = 'STREAMING-UNSIGNED-PAYLOAD-TRAILER';

export type PayloadMode = 'sign_body' | 'unsigned_payload' | 'streaming_unsigned_trailer';

/** The payload mode for one request, or a refusal for a streaming signature boundary cannot re-sign. */
export function payloadMode(input: {
  readonly signing: CredentialSigning;
  /** The workload's own x-amz-content-sha256, before it was dropped. */
  readonly clientHash: string | undefined;
  readonly hasContentLength: boolean;
}): PayloadMode | RewriteRefusal {
  if (input.signing === 'sigv4:body') return 'sign_body';
  if (input.signing === 'sigv4:no_body') return 'unsigned_payload';
  const hash = input.clientHash;
  if (hash === undefined) return input.hasContentLength ? 'sign_body' : 'unsigned_payload';
  if (hash === STREAMING_UNSIGNED_TRAILER) return 'streaming_unsigned_trailer';
  if (hash === UNSIGNED_PAYLOAD) return 'unsigned_payload';
  if (hash.startsWith('STREAMING-')) {
    return refuse('signing-mode-unsupported', `x-amz-content-sha256 ${hash.slice(0, 64)} cannot be re-signed; set credential_signing: sigv4:no_body`);
  }
  return 'sign_body';
}

export interface SignInput {
  readonly scope: CredentialScope;
  readonly service: string;
  /** signing_region, or undefined to derive it from the host. */
  readonly region: string | undefined;
  readonly host: string;
  readonly port: number;
  readonly tls: boolean;
  readonly method: string;
  /** Origin-form target as it goes upstream (already rewritten). */
  readonly target: string;
  /** Flat `[name, value, ...]` without the AWS auth headers. */
  readonly headers: readonly string[];
  readonly mode: PayloadMode;
  /** The whole body in sign_body mode; ignored otherwise. */
  readonly body: Buffer | undefined;
}

export type SignResult = { readonly ok: true; readonly headers: string[]; readonly region: string } | RewriteRefusal;

function plainKey(scope: CredentialScope, key: string): string | undefined | 'mismatch' {
  // No family: boundary's own lookup by key name, not a placeholder the workload wrote.
  const resolution = scope.resolve({ form: 'canonical', key });
  if (resolution.kind === 'mismatch') return 'mismatch';
  return resolution.kind === 'value' ? resolution.secret.reveal() : undefined;
}

function parseQuery(query: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const part of query.split('&')) {
    if (part === '') continue;
    const eq = part.indexOf('=');
    const name = decodeURIComponent(eq < 0 ? part : part.slice(0, eq));
    const value = eq < 0 ? '' : decodeURIComponent(part.slice(eq + 1));
    const seen = out[name];
    out[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
  }
  return out;
}

/** Signs the request with the provider's AWS keys. The returned headers replace the request's. */
export async function signRequest(input: SignInput): Promise<SignResult> {
  const region = input.region ?? regionFromHost(input.host);
  if (region === undefined) {
    return refuse('signing-region-unknown', `cannot derive an AWS region from ${input.host}; set signing_region`);
  }
  const accessKeyId = plainKey(input.scope, 'AWS_ACCESS_KEY_ID');
  const secretAccessKey = plainKey(input.scope, 'AWS_SECRET_ACCESS_KEY');
  // Optional: a token held only by providers of other endpoints is not this endpoint's, so none is sent.
  const token = plainKey(input.scope, 'AWS_SESSION_TOKEN');
  const sessionToken = token === 'mismatch' ? undefined : token;
  if (accessKeyId === 'mismatch' || secretAccessKey === 'mismatch') {
    return refuse('endpoint-mismatch', 'an AWS key for this signing endpoint is bound to another endpoint');
  }
  if (accessKeyId === undefined || secretAccessKey === undefined) {
    return refuse('signing-keys-missing', 'no provider bound to this signing endpoint holds AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY');
  }
  const headers: Record<string, string> = {};
  for (let i = 0; i < input.headers.length; i += 2) {
    const name = (input.headers[i] ?? '').toLowerCase();
    const value = input.headers[i + 1] ?? '';
    headers[name] = headers[name] === undefined ? value : `${headers[name]},${value}`;
  }
  headers['x-amz-content-sha256'] =
    input.mode === 'sign_body'
      ? createHash('sha256').update(input.body ?? Buffer.alloc(0)).digest('hex')
      : input.mode === 'unsigned_payload'
        ? UNSIGNED_PAYLOAD
        : STREAMING_UNSIGNED_TRAILER;
  const q = input.target.indexOf('?');
  const { Hash, SignatureV4 } = smithy();
  const signer = new SignatureV4({
    service: input.service,
    region,
    credentials: { accessKeyId, secretAccessKey, ...(sessionToken === undefined ? {} : { sessionToken }) },
    sha256: Hash.bind(null, 'sha256'),
    // S3 signs the path as sent; every other service signs it escaped once more (what the AWS SDK does).
    uriEscapePath: input.service !== 's3',
  });
  const signed = await signer.sign(
    {
      method: input.method,
      protocol: input.tls ? 'https:' : 'http:',
      hostname: input.host,
      port: input.port,
      path: q < 0 ? input.target : input.target.slice(0, q),
      query: q < 0 ? {} : parseQuery(input.target.slice(q + 1)),
      headers,
    },
    { unsignableHeaders: new Set(UNSIGNED_HEADERS) },
  );
  const flat: string[] = [];
  for (const [name, value] of Object.entries(signed.headers)) flat.push(name, value);
  return { ok: true, headers: flat, region };
}
