// The control channel's messages (DESIGN "Control channel protocol (v1)"): types, the fields of each kind,
// encode/decode of one JSON message (field readers: message-fields.ts). Pure of sockets, TLS and HTTP/2; both
// the boundary (control/client.ts) and the reference supervisor (supervisor/) speak through it.

import { BoundaryError, type Issue } from '../shared/errors.js';
import { compact, type Fields, isRecord, issue, type Reader, reader } from './message-fields.js';

export const MAX_CONTROL_MESSAGE_BYTES = 1_048_576;

export const MESSAGE_KINDS = [
  'attach',
  'admitted',
  'refused',
  'policy',
  'credentials',
  'settings',
  'relay-open',
  'withdraw',
  'status',
  'events',
  'ack',
] as const;
export type MessageKind = (typeof MESSAGE_KINDS)[number];

/** The kinds that arrive on `GET /v1/watch`. */
export const PUSH_KINDS = ['policy', 'credentials', 'settings', 'relay-open', 'withdraw'] as const;

/** Why a dial or attach failed; every NET:FAIL event and /readyz carries one. */
export const CONTROL_ERROR_KINDS = [
  'dns',
  'connect-refused',
  'connect-timeout',
  'tls',
  'tls-auth',
  'http2',
  'refused-by-supervisor',
  'protocol',
  'superseded',
] as const;
export type ControlErrorKind = (typeof CONTROL_ERROR_KINDS)[number];

/** Typed refusals of the supervisor. `retryable` tells the boundary whether trying again can help. */
const REFUSAL_CODES = [
  'unknown-sandbox',
  'no-sandbox-identity',
  'identity-mismatch',
  'policy-invalid',
  'bad-request',
  'message-too-large',
  'unknown-session',
  'too-many-instances',
  'shutting-down',
  'relay-target-not-allowed',
  'relay-target-unreachable',
] as const;
export type RefusalCode = (typeof REFUSAL_CODES)[number];

/**
 * Why a withdraw push ends a session. `withdrawn`: the supervisor freed the instance. `replaced`: a new session
 * of the same process, or of a process whose old session was already dead, took over (the boundary just
 * re-attaches). `superseded`: another live boundary process took this (sandbox, instance) identity; the
 * receiver stops competing for it (see control/client.ts).
 */
export const WITHDRAW_CODES = ['withdrawn', 'replaced', 'superseded'] as const;
type WithdrawCode = (typeof WITHDRAW_CODES)[number];

const FAILURE_MODES = ['fail_closed', 'retain_last_valid'] as const;
export type FailureMode = (typeof FAILURE_MODES)[number];

const STATUS_STATES = ['effective', 'failed'] as const;
type StatusState = (typeof STATUS_STATES)[number];

export interface ControlSettings {
  /** What an invalid pushed policy does: publish deny-all (default) or keep the previous one. */
  readonly failureMode: FailureMode;
}

export interface StatusError {
  /** A ControlErrorKind, or `policy` / `credentials` for an apply failure. */
  readonly kind: string;
  readonly code?: string;
  readonly message: string;
}

/** One credential provider as delivered: the same shape as credentials/set.ts's ProviderInput. */
export interface WireProvider {
  /** Token grants the boundary runs itself (docs/credentials.md#token-grants); absent from older supervisors. */
  readonly tokenGrants?: readonly WireTokenGrant[];
  readonly name: string;
  readonly env: Readonly<Record<string, string>>;
  readonly endpoints?: readonly WireCredentialEndpoint[];
  /** A client certificate the boundary presents upstream: leaf and chain PEM, and the key (docs/credentials.md#client-certificates). */
  readonly clientCertificatePem?: { readonly certChain: string; readonly key: string };
  /** Key -> placeholder format id (docs/credentials.md#shaped-placeholders). */
  readonly formatIds?: Readonly<Record<string, string>>;
}

/**
 * One token grant as delivered: credentials/grant.ts's TokenGrantInput with its secrets as strings (the mTLS
 * channel is the one place they travel outside a Secret). The boundary fetches and refreshes the token itself.
 */
export interface WireTokenGrant {
  readonly key: string;
  readonly grantType: string;
  readonly tokenEndpoint: string;
  readonly clientId: string;
  readonly clientSecret?: string;
  readonly clientAuth: string;
  readonly refreshToken?: string;
  readonly scope?: string;
  readonly audience?: string;
  readonly resource?: string;
  /** `bearer`, or the name of the header the token goes in; absent: placeholders only. */
  readonly placement?: WireGrantPlacement;
  readonly privateTokenEndpoint: boolean;
}

export type WireGrantPlacement = { readonly kind: 'bearer' } | { readonly kind: 'header'; readonly name: string };

interface WireCredentialEndpoint {
  readonly host: string;
  readonly port: number;
  readonly path?: string;
}

export interface AttachMessage {
  readonly kind: 'attach';
  readonly sandboxId: string;
  readonly instanceId: string;
  readonly bootId: string;
  readonly version: string;
  readonly heldPolicyHash?: string;
  readonly heldGeneration?: number;
  readonly heldCredentialsHash?: string;
  /** The last failure the boundary saw before this attach, so the supervisor can show it. */
  readonly lastError?: StatusError;
}

/** Admission: a full snapshot. `policy`/`credentials` are omitted when the held hash already matches. */
export interface AdmittedMessage {
  readonly kind: 'admitted';
  readonly sessionId: string;
  readonly generation: number;
  readonly policyHash: string;
  readonly policy?: string;
  readonly credentialsHash: string;
  readonly credentials?: readonly WireProvider[];
  readonly settings: ControlSettings;
  /** The supervisor's middleware service registrations; absent: none (docs/supervisor.md#middleware-services). */
  readonly middleware?: readonly WireMiddlewareService[];
}

export interface RefusedMessage {
  readonly kind: 'refused';
  readonly code: RefusalCode;
  readonly message: string;
  readonly retryable: boolean;
}

export interface PolicyPush {
  readonly kind: 'policy';
  readonly generation: number;
  readonly policyHash: string;
  /** The policy YAML text; both sides parse it with the same parser. */
  readonly policy: string;
  /** As in AdmittedMessage: registered before the policy is parsed, so it may name them. */
  readonly middleware?: readonly WireMiddlewareService[];
}

/**
 * One external middleware service as the supervisor registers it: middleware/registrations.ts's registration with
 * its CA as PEM text. Shapes only on the wire; the boundary checks it as it checks --middleware-config.
 */
export interface WireMiddlewareService {
  readonly name: string;
  readonly grpcEndpoint: string;
  readonly maxPayloadBytes: number;
  readonly timeoutMs: number;
  readonly allowInsecureTransport?: boolean;
  readonly caPem?: string;
}

export interface CredentialsPush {
  readonly kind: 'credentials';
  readonly generation: number;
  readonly credentialsHash: string;
  readonly credentials: readonly WireProvider[];
}

export interface SettingsPush {
  readonly kind: 'settings';
  readonly generation: number;
  readonly settings: ControlSettings;
}

export interface RelayTarget {
  readonly host: string;
  readonly port: number;
}

export interface RelayOpenPush {
  readonly kind: 'relay-open';
  readonly id: string;
  readonly target: RelayTarget;
}

interface WithdrawPush {
  readonly kind: 'withdraw';
  readonly reason: string;
  /** Absent from older supervisors; read as `withdrawn`. */
  readonly code?: WithdrawCode;
  /** With `superseded`: the boot id of the boundary process that took over. */
  readonly bootId?: string;
}

export interface StatusMessage {
  readonly kind: 'status';
  readonly generation: number;
  readonly policyHash: string;
  readonly state: StatusState;
  readonly credentialsHash?: string;
  readonly error?: StatusError;
}

export interface EventsMessage {
  readonly kind: 'events';
  readonly events: readonly Readonly<Record<string, unknown>>[];
  /** Events dropped from the bounded buffer since the previous batch was delivered. */
  readonly dropped: number;
}

interface AckMessage {
  readonly kind: 'ack';
}

export type PushMessage = PolicyPush | CredentialsPush | SettingsPush | RelayOpenPush | WithdrawPush;
export type ControlMessage =
  | AttachMessage
  | AdmittedMessage
  | RefusedMessage
  | PushMessage
  | StatusMessage
  | EventsMessage
  | AckMessage;
export type MessageOf<K extends MessageKind> = Extract<ControlMessage, { kind: K }>;

export const DEFAULT_SETTINGS: ControlSettings = Object.freeze({ failureMode: 'fail_closed' });

/** Serialises one message as a JSON line (with the trailing newline). */
export function encodeMessage(message: ControlMessage): string {
  const line = `${JSON.stringify(message)}\n`;
  const bytes = Buffer.byteLength(line);
  if (bytes > MAX_CONTROL_MESSAGE_BYTES) {
    throw new BoundaryError(
      'MESSAGE_TOO_LARGE',
      `${message.kind} message is ${bytes} bytes; the limit is MAX_CONTROL_MESSAGE_BYTES (${MAX_CONTROL_MESSAGE_BYTES})`,
    );
  }
  return line;
}

/**
 * Decodes and validates one message. Throws BoundaryError MESSAGE_TOO_LARGE or CONTROL_MESSAGE_INVALID
 * (with every problem in `issues`). With `expect`, any other kind is CONTROL_MESSAGE_INVALID too.
 */
export function decodeMessage<K extends MessageKind = MessageKind>(
  input: string | Uint8Array,
  expect?: readonly K[],
): MessageOf<K> {
  const size = typeof input === 'string' ? Buffer.byteLength(input) : input.byteLength;
  if (size > MAX_CONTROL_MESSAGE_BYTES) {
    throw new BoundaryError('MESSAGE_TOO_LARGE', `control message of ${size} bytes exceeds ${MAX_CONTROL_MESSAGE_BYTES}`);
  }
  const text = (typeof input === 'string' ? input : Buffer.from(input).toString('utf8')).trim();
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw invalid(`not JSON: ${(err as Error).message}`, [], err);
  }
  const message = readMessage(raw);
  if (expect !== undefined && !(expect as readonly string[]).includes(message.kind)) {
    throw invalid(`expected ${expect.join(' or ')}, got ${message.kind}`, []);
  }
  return message as MessageOf<K>;
}

/** Validates an already-parsed value as a control message; returns it deep-frozen. */
export function readMessage(raw: unknown): ControlMessage {
  const issues: Issue[] = [];
  const r = reader(issues, { maxBodyChars: MAX_CONTROL_MESSAGE_BYTES, failureModes: FAILURE_MODES });
  if (!isRecord(raw)) throw invalid('a control message must be a JSON object', []);
  const kind = raw.kind;
  if (typeof kind !== 'string' || !(MESSAGE_KINDS as readonly string[]).includes(kind)) {
    throw invalid(`unknown message kind ${JSON.stringify(kind)}`, [issue('kind', 'unknown message kind')]);
  }
  const read = READERS[kind as MessageKind];
  const keys = Object.keys(raw).filter((key) => key !== 'kind');
  const message = read(raw, r);
  for (const key of keys) if (!(key in message)) issues.push(issue(key, 'unknown key'));
  if (issues.length > 0) {
    const first = issues[0]!;
    throw invalid(`${kind}: ${first.path}: ${first.message}${issues.length > 1 ? ` (+${issues.length - 1} more)` : ''}`, issues);
  }
  return deepFreeze({ kind, ...message } as ControlMessage);
}

const READERS: Record<MessageKind, (raw: Fields, r: Reader) => Fields> = {
  attach: (raw, r) =>
    compact({
      sandboxId: r.id(raw, 'sandboxId'),
      instanceId: r.id(raw, 'instanceId'),
      bootId: r.id(raw, 'bootId'),
      version: r.text(raw, 'version'),
      heldPolicyHash: r.optional(raw, 'heldPolicyHash', r.hash),
      heldGeneration: r.optional(raw, 'heldGeneration', r.generation),
      heldCredentialsHash: r.optional(raw, 'heldCredentialsHash', r.hash),
      lastError: r.optional(raw, 'lastError', r.statusError),
    }),
  admitted: (raw, r) =>
    compact({
      sessionId: r.id(raw, 'sessionId'),
      generation: r.generation(raw, 'generation'),
      policyHash: r.hash(raw, 'policyHash'),
      policy: r.optional(raw, 'policy', r.body),
      credentialsHash: r.hash(raw, 'credentialsHash'),
      credentials: r.optional(raw, 'credentials', r.credentials),
      settings: r.settings(raw, 'settings'),
      middleware: r.optional(raw, 'middleware', r.middlewareServices),
    }),
  refused: (raw, r) => ({
    code: r.oneOf(raw, 'code', REFUSAL_CODES),
    message: r.text(raw, 'message'),
    retryable: r.bool(raw, 'retryable'),
  }),
  policy: (raw, r) =>
    compact({
      generation: r.generation(raw, 'generation'),
      policyHash: r.hash(raw, 'policyHash'),
      policy: r.body(raw, 'policy'),
      middleware: r.optional(raw, 'middleware', r.middlewareServices),
    }),
  credentials: (raw, r) => ({
    generation: r.generation(raw, 'generation'),
    credentialsHash: r.hash(raw, 'credentialsHash'),
    credentials: r.credentials(raw, 'credentials'),
  }),
  settings: (raw, r) => ({ generation: r.generation(raw, 'generation'), settings: r.settings(raw, 'settings') }),
  'relay-open': (raw, r) => ({ id: r.id(raw, 'id'), target: r.target(raw, 'target') }),
  withdraw: (raw, r) =>
    compact({
      reason: r.text(raw, 'reason'),
      code: r.optional(raw, 'code', (v, k) => r.oneOf(v, k, WITHDRAW_CODES)),
      bootId: r.optional(raw, 'bootId', r.id),
    }),
  status: (raw, r) =>
    compact({
      generation: r.generation(raw, 'generation'),
      policyHash: r.hash(raw, 'policyHash'),
      state: r.oneOf(raw, 'state', STATUS_STATES),
      credentialsHash: r.optional(raw, 'credentialsHash', r.hash),
      error: r.optional(raw, 'error', r.statusError),
    }),
  events: (raw, r) => ({ events: r.events(raw, 'events'), dropped: r.count(raw, 'dropped') }),
  ack: () => ({}),
};

function invalid(message: string, issues: readonly Issue[], cause?: unknown): BoundaryError {
  return new BoundaryError('CONTROL_MESSAGE_INVALID', message, cause === undefined ? { issues } : { issues, cause });
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
