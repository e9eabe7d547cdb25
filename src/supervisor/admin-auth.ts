// Operator authentication for the supervisor's admin listener: a bearer token read from a file (re-checked
// on every use, so a rotated Kubernetes Secret applies without a restart) and an operator client certificate
// (spiffe://<td>/operator/<name>). Says who the caller is, or why not; routes nothing.

import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { TLSSocket } from '../shared/node-tls.js';
import { BoundaryError } from '../shared/errors.js';
import { certificateUris, parseOperatorSpiffeId } from '../pki/issue.js';
import type { Logger } from '../telemetry/logger.js';

export const MIN_ADMIN_TOKEN_CHARS = 32;
const MAX_ADMIN_TOKEN_BYTES = 4_096;
export const ADMIN_AUTH_REALM = 'boundary-supervisor';
/** What a request asked for: a plain request or upgrade (401, Authorization) or CONNECT (407, Proxy-Authorization). */
export type AdminCallStyle = 'request' | 'connect';

export type AdminAuthResult =
  | { readonly ok: true; readonly operator: string; readonly via: 'token' | 'certificate' }
  | { readonly ok: false; readonly status: 401 | 403 | 407 | 503; readonly error: string; readonly message: string };

export interface AdminAuth {
  /** Reads the token file once: a supervisor never starts on a token that would refuse everyone. */
  start(): Promise<void>;
  authenticate(req: IncomingMessage, style: AdminCallStyle): Promise<AdminAuthResult>;
}

interface AdminAuthOptions {
  /** Its trimmed content is the token. */
  readonly tokenFile?: string | undefined;
  /** Accept verified operator certificates (the listener speaks TLS and requests client certificates). */
  readonly certificates: boolean;
  /** When set, an operator certificate of another trust domain is refused. */
  readonly trustDomain?: string | undefined;
  readonly logger: Logger;
}

// Printable ASCII without spaces: anything else could not travel in an Authorization header.
const TOKEN_TEXT = /^[\x21-\x7e]+$/;

const digest = (text: string): Buffer => createHash('sha256').update(text).digest();

/** The token file's trimmed content as a digest, or why it cannot be used. */
async function readToken(path: string, size: number): Promise<{ ok: true; digest: Buffer } | { ok: false; message: string }> {
  if (size > MAX_ADMIN_TOKEN_BYTES) return { ok: false, message: `${path} is larger than MAX_ADMIN_TOKEN_BYTES (${MAX_ADMIN_TOKEN_BYTES})` };
  const token = (await readFile(path, 'utf8')).trim();
  if (!TOKEN_TEXT.test(token)) return { ok: false, message: `${path} must hold one token of printable ASCII without spaces` };
  if (token.length < MIN_ADMIN_TOKEN_CHARS) return { ok: false, message: `${path} holds a token shorter than ${MIN_ADMIN_TOKEN_CHARS} characters` };
  return { ok: true, digest: digest(token) };
}

/** The token a request carries: `Authorization: Bearer`, and for CONNECT also `Proxy-Authorization` Bearer or Basic. */
function presentedToken(req: IncomingMessage, style: AdminCallStyle): string | undefined {
  const candidates: [string | undefined, boolean][] = [[req.headers.authorization, false]];
  if (style === 'connect') candidates.push([req.headers['proxy-authorization'], true]);
  for (const [value, basicAllowed] of candidates) {
    const match = value === undefined ? null : /^(bearer|basic)[ \t]+(\S+)[ \t]*$/i.exec(value);
    const scheme = match?.[1]?.toLowerCase();
    const credentials = match?.[2] ?? '';
    if (scheme === 'bearer') return credentials;
    if (scheme !== 'basic' || !basicAllowed) continue;
    // Basic base64(<user>:<token>): socat's proxyauth=operator:TOKEN sends nothing else. The user is ignored.
    const decoded = Buffer.from(credentials, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon >= 0) return decoded.slice(colon + 1);
  }
  return undefined;
}

export function createAdminAuth(options: AdminAuthOptions): AdminAuth {
  const { tokenFile, logger } = options;
  if (tokenFile === undefined && !options.certificates) {
    throw new BoundaryError('ADMIN_AUTH_MISSING', 'the admin listener needs a token file, operator certificates (admin TLS) or both');
  }
  // stat() follows the Secret's `FILE -> ..data/FILE` symlinks, so an atomic swap of `..data` shows as a new
  // inode and ctime even though the name never changed.
  let seen: string | undefined;
  let token: Buffer | undefined;
  let problem = 'not read yet';

  async function currentToken(path: string): Promise<Buffer | undefined> {
    let key: string;
    try {
      const info = await stat(path);
      key = `${info.dev}:${info.ino}:${info.size}:${info.mtimeMs}:${info.ctimeMs}`;
      if (key === seen) return token;
      const read = await readToken(path, info.size);
      // Fail closed: a rotation that went wrong must not leave the previous (perhaps revoked) token working.
      token = read.ok ? read.digest : undefined;
      problem = read.ok ? '' : read.message;
    } catch (err) {
      key = `error:${(err as NodeJS.ErrnoException).code ?? 'unknown'}`;
      token = undefined;
      problem = `cannot read ${path}: ${(err as Error).message}`;
    }
    if (key !== seen) {
      if (token !== undefined) logger.info({ tokenFile: path }, 'admin token loaded');
      else logger.warn({ tokenFile: path }, `admin token refused; token requests fail until the file is fixed: ${problem}`);
    }
    seen = key;
    return token;
  }

  function certificateOperator(req: IncomingMessage): AdminAuthResult | undefined {
    const socket = req.socket;
    if (!options.certificates || !(socket instanceof TLSSocket)) return undefined;
    const cert = socket.getPeerX509Certificate();
    if (cert === undefined) return undefined;
    if (!socket.authorized) {
      return { ok: false, status: 403, error: 'forbidden', message: `client certificate rejected: ${String(socket.authorizationError)}` };
    }
    for (const uri of certificateUris(cert)) {
      const id = parseOperatorSpiffeId(uri);
      if (id !== undefined && (options.trustDomain === undefined || id.trustDomain === options.trustDomain)) {
        return { ok: true, operator: id.operator, via: 'certificate' };
      }
    }
    return { ok: false, status: 403, error: 'forbidden', message: 'the client certificate names no spiffe://<trust-domain>/operator/<name> URI' };
  }

  return {
    async start() {
      if (tokenFile !== undefined && (await currentToken(tokenFile)) === undefined) throw new BoundaryError('ADMIN_TOKEN_INVALID', problem);
    },
    async authenticate(req, style) {
      const byCertificate = certificateOperator(req);
      if (byCertificate?.ok === true) return byCertificate;
      const presented = presentedToken(req, style);
      if (presented === undefined) {
        if (byCertificate !== undefined) return byCertificate;
        const status = style === 'connect' ? 407 : 401;
        return { ok: false, status, error: 'unauthenticated', message: 'send Authorization: Bearer <token> or an operator client certificate' };
      }
      const expected = tokenFile === undefined ? undefined : await currentToken(tokenFile);
      if (tokenFile !== undefined && expected === undefined) {
        return { ok: false, status: 503, error: 'token-unavailable', message: 'the admin token file is unreadable or invalid; see the supervisor log' };
      }
      // Digests have one length, so timingSafeEqual never throws and the comparison leaks nothing about the token.
      if (expected !== undefined && timingSafeEqual(digest(presented), expected)) return { ok: true, operator: 'token', via: 'token' };
      return { ok: false, status: 403, error: 'forbidden', message: 'the admin token does not match' };
    },
  };
}
