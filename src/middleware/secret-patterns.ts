// The secret scanner's maintained pattern set (docs/policy.md#secret-scanner): one entry per kind of secret, each a
// regex written to run in linear time over a bounded body (a match starts only where a token starts, every repetition
// is bounded) and, where the shape alone is too loose, a check of what matched. Pure data.

/** One kind of secret the scanner knows. */
export interface SecretPattern {
  /** The finding type's suffix (`secret.<kind>`); never the match. */
  readonly kind: string;
  /** Global (and sticky-free) so a body is scanned in one pass per kind. */
  readonly regex: RegExp;
  /** A further test of one match, for shapes ordinary text also has (a JWT's header must be JSON naming `alg`). */
  readonly accept?: (match: string) => boolean;
}

/** Largest JWT segment the scanner reads; longer runs are not taken for tokens. */
const MAX_JWT_SEGMENT_CHARS = 8_192;

/** A JWT header: base64url of a JSON object with a string `alg`. */
function isJwt(match: string): boolean {
  const header = Buffer.from(match.slice(0, match.indexOf('.')), 'base64url').toString('utf8');
  // Most lookalikes fail here, without the cost of a parse that throws.
  if (!header.includes('"alg"')) return false;
  try {
    const parsed: unknown = JSON.parse(header);
    return parsed !== null && typeof parsed === 'object' && typeof (parsed as { alg?: unknown }).alg === 'string';
  } catch {
    return false;
  }
}

/** A generated tail has digits and letters of both cases; a hyphenated name after `sk-` has not. */
function looksGenerated(match: string): boolean {
  return /[0-9]/.test(match) && /[A-Z]/.test(match) && /[a-z]/.test(match);
}

// `(?<![...])` instead of `\b`: a match may start only at the first character of a run of token characters, so a long
// run is walked once, not once per position in it.
export const BUILTIN_SECRET_PATTERNS: readonly SecretPattern[] = Object.freeze([
  { kind: 'aws_access_key_id', regex: /(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z2-7]{16}(?![A-Za-z0-9])/g },
  {
    kind: 'aws_secret_access_key',
    regex: /(?<![A-Za-z0-9_])(?:aws_?)?secret_?access_?key["']?[ \t]{0,4}[:=][ \t]{0,4}["']?[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])/gi,
  },
  { kind: 'gcp_api_key', regex: /(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])/g },
  // Also inside a JSON string (a key file sent as one field), where its quotes are escaped.
  { kind: 'gcp_service_account_key', regex: /\\?"private_key_id\\?"[ \t]{0,4}:[ \t]{0,4}\\?"[0-9a-f]{40}\\?"/g },
  { kind: 'azure_storage_key', regex: /AccountKey=[A-Za-z0-9+/]{86}==/g },
  { kind: 'github_token', regex: /(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{36,251}(?![A-Za-z0-9])/g },
  { kind: 'github_fine_grained_token', regex: /(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{82,251}(?![A-Za-z0-9_])/g },
  { kind: 'gitlab_token', regex: /(?<![A-Za-z0-9_-])glpat-[A-Za-z0-9_-]{20,251}(?![A-Za-z0-9_-])/g },
  { kind: 'slack_token', regex: /(?<![A-Za-z0-9_-])xox[abposr]-[A-Za-z0-9-]{10,251}(?![A-Za-z0-9-])/g },
  { kind: 'slack_app_token', regex: /(?<![A-Za-z0-9_-])xapp-[A-Za-z0-9-]{20,251}(?![A-Za-z0-9-])/g },
  { kind: 'anthropic_key', regex: /(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,251}(?![A-Za-z0-9_-])/g },
  { kind: 'openai_key', regex: /(?<![A-Za-z0-9_-])sk-(?!ant-)[A-Za-z0-9_-]{20,251}(?![A-Za-z0-9_-])/g, accept: looksGenerated },
  { kind: 'stripe_key', regex: /(?<![A-Za-z0-9_])[sr]k_live_[A-Za-z0-9]{20,251}(?![A-Za-z0-9])/g },
  {
    kind: 'private_key',
    // The whole block where its END line follows (a JSON string's `\n` escapes included), else the BEGIN line and
    // the base64 after it: redaction leaves no key material behind.
    regex: /-----BEGIN[ A-Z0-9]{0,32} PRIVATE KEY(?: BLOCK)?-----[A-Za-z0-9+/=\s\\:,]{0,16384}(?:-----END[ A-Z0-9]{0,32} PRIVATE KEY(?: BLOCK)?-----)?/g,
  },
  {
    kind: 'jwt',
    regex: new RegExp(
      `(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,${MAX_JWT_SEGMENT_CHARS}}\\.[A-Za-z0-9_-]{2,${MAX_JWT_SEGMENT_CHARS}}\\.[A-Za-z0-9_-]{0,${MAX_JWT_SEGMENT_CHARS}}(?![A-Za-z0-9_-])`,
      'g',
    ),
    accept: isJwt,
  },
]);
