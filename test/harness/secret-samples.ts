// Made-up values in the shape of each secret kind boundary/secret-scan knows (none is a real credential). Built by
// concatenation so no repository scanner takes this file for a leak.

const run = (alphabet: string, n: number): string => Array.from({ length: n }, (_, i) => alphabet[(i * 7 + 3) % alphabet.length]).join('');
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const B64 = `${ALNUM}+/`;
const b64url = (text: string): string => Buffer.from(text, 'utf8').toString('base64url');

/** One sample per kind: the finding type's suffix and a value of that shape. */
export const SECRET_SAMPLES: readonly { readonly kind: string; readonly value: string }[] = [
  { kind: 'aws_access_key_id', value: `AK${'IA'}${run('ABCDEFGHIJKLMNOPQRSTUVWXYZ234567', 16)}` },
  { kind: 'aws_secret_access_key', value: `aws_secret_access_key = ${run(B64, 40)}` },
  { kind: 'gcp_api_key', value: `AI${'za'}${run(`${ALNUM}_-`, 35)}` },
  { kind: 'gcp_service_account_key', value: `"private_key_id": "${run('0123456789abcdef', 40)}"` },
  { kind: 'azure_storage_key', value: `Account${'Key'}=${run(B64, 86)}==` },
  ...['p', 'o', 'u', 's', 'r'].map((c) => ({ kind: 'github_token', value: `gh${c}_${run(ALNUM, 36)}` })),
  { kind: 'github_fine_grained_token', value: `github_${'pat'}_${run(`${ALNUM}_`, 82)}` },
  { kind: 'gitlab_token', value: `gl${'pat'}-${run(`${ALNUM}_-`, 20)}` },
  ...['a', 'b', 'p', 'o', 's', 'r'].map((c) => ({ kind: 'slack_token', value: `xo${'x'}${c}-${run('0123456789', 12)}-${run(ALNUM, 24)}` })),
  { kind: 'slack_app_token', value: `xa${'pp'}-1-${run(ALNUM, 11)}-${run('0123456789', 13)}-${run('abcdef0123456789', 40)}` },
  { kind: 'openai_key', value: `s${'k'}-proj-${run(`${ALNUM}_-`, 48)}` },
  { kind: 'anthropic_key', value: `s${'k'}-ant-api03-${run(`${ALNUM}_-`, 90)}` },
  { kind: 'stripe_key', value: `s${'k'}_live_${run(ALNUM, 24)}` },
  { kind: 'stripe_key', value: `r${'k'}_live_${run(ALNUM, 24)}` },
  { kind: 'private_key', value: `-----BEGIN RSA ${'PRIVATE'} KEY-----\n${run(B64, 64)}\n${run(B64, 40)}=\n-----END RSA ${'PRIVATE'} KEY-----` },
  { kind: 'jwt', value: `${b64url('{"alg":"HS256","typ":"JWT"}')}.${b64url('{"sub":"agent-7","iat":1700000000}')}.${run(`${ALNUM}_-`, 43)}` },
];
