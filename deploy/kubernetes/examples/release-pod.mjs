#!/usr/bin/env node
// A withdrawal hook for the supervisor (docs/kubernetes.md#withdrawal-hooks): acts on the withdrawn instance's pod
// through the Kubernetes API with the supervisor's ServiceAccount. Node built-ins only (node:22-slim has no curl).
//
//   release-pod.mjs ungate --gate NAME [--namespace NS]          remove scheduling gate NAME from the pod
//   release-pod.mjs delete [--pvc NAME] [--namespace NS]         delete the pod, then PVC NAME ({instance} expands)
//
// The pod is named by BOUNDARY_INSTANCE_ID; NS defaults to "default". Exit 0 means done, including when the pod
// (or PVC) is already gone: delivery is at least once, so a retry after a success must also succeed. Exit 1 is a
// failure the supervisor retries; exit 2 a usage error (retried too, so fix the arguments).
//
// Environment, for tests and for clusters that mount the token elsewhere:
//   RELEASE_POD_API_URL  API server base URL        (default https://kubernetes.default.svc)
//   RELEASE_POD_SA_DIR   directory with token, ca.crt (default /var/run/secrets/kubernetes.io/serviceaccount)
//
// node:https rather than fetch: fetch cannot be given the ServiceAccount CA without the undici package.
import { readFile } from 'node:fs/promises';
import { request } from 'node:https';
import { join } from 'node:path';

const DEFAULT_API_URL = 'https://kubernetes.default.svc';
const DEFAULT_SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** Under the supervisor's 30 s hook timeout, so this script reports its own failure instead of being killed. */
const REQUEST_TIMEOUT_MS = 10_000;
const MAX_BODY_EXCERPT_CHARS = 300;
/** A pod or PVC name: an RFC 1123 subdomain. Anything else never reaches a URL path. */
const NAME_PATTERN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

class UsageError extends Error {}

function parseArgs(argv) {
  const [mode, ...rest] = argv;
  if (mode !== 'ungate' && mode !== 'delete') throw new UsageError('first argument must be ungate or delete');
  const options = { mode, namespace: 'default', gate: undefined, pvc: undefined };
  for (let i = 0; i < rest.length; i += 2) {
    const flag = rest[i];
    const value = rest[i + 1];
    if (value === undefined) throw new UsageError(`${flag} needs a value`);
    if (flag === '--namespace') options.namespace = value;
    else if (flag === '--gate' && mode === 'ungate') options.gate = value;
    else if (flag === '--pvc' && mode === 'delete') options.pvc = value;
    else throw new UsageError(`unknown option ${flag} for ${mode}`);
  }
  if (mode === 'ungate' && options.gate === undefined) throw new UsageError('ungate needs --gate NAME');
  return options;
}

function checkName(what, name) {
  if (!NAME_PATTERN.test(name)) throw new UsageError(`${what} ${JSON.stringify(name)} is not a valid Kubernetes name`);
  return name;
}

/** One API call; resolves with { status, body } for any HTTP answer. */
function call(api, { method, path, body, contentType }) {
  const url = new URL(path, api.base);
  const headers = { authorization: `Bearer ${api.token}`, accept: 'application/json' };
  if (body !== undefined) {
    headers['content-type'] = contentType;
    headers['content-length'] = String(Buffer.byteLength(body));
  }
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers, ca: api.ca, agent: false, timeout: REQUEST_TIMEOUT_MS }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        if (text.length < MAX_BODY_EXCERPT_CHARS) text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text.slice(0, MAX_BODY_EXCERPT_CHARS) }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)));
    req.on('error', (err) => reject(new Error(`${method} ${url.pathname}: ${err.message}`)));
    req.end(body);
  });
}

/** 2xx: done; 404: already done (the object is gone); anything else fails the attempt. */
async function expectDoneOrGone(api, what, call_) {
  const res = await call(api, call_);
  if (res.status >= 200 && res.status < 300) return `${what}: done`;
  if (res.status === 404) return `${what}: already gone`;
  throw new Error(`${what}: ${call_.method} ${call_.path} answered ${res.status}: ${res.body.replace(/\s+/g, ' ')}`);
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const pod = checkName('BOUNDARY_INSTANCE_ID', process.env.BOUNDARY_INSTANCE_ID ?? '');
  const namespace = checkName('namespace', options.namespace);
  const saDir = process.env.RELEASE_POD_SA_DIR ?? DEFAULT_SA_DIR;
  const api = {
    base: process.env.RELEASE_POD_API_URL ?? DEFAULT_API_URL,
    // Read on every run: the kubelet rotates the projected token.
    token: (await readFile(join(saDir, 'token'), 'utf8')).trim(),
    ca: await readFile(join(saDir, 'ca.crt'), 'utf8'),
  };
  const podPath = `/api/v1/namespaces/${namespace}/pods/${pod}`;
  const results = [];
  if (options.mode === 'ungate') {
    // Strategic merge patch: schedulingGates merges on name, so this removes just that gate, and is a no-op
    // when it was removed already.
    const body = JSON.stringify({ spec: { schedulingGates: [{ $patch: 'delete', name: options.gate }] } });
    results.push(await expectDoneOrGone(api, `ungate pod ${namespace}/${pod}`, { method: 'PATCH', path: podPath, body, contentType: 'application/strategic-merge-patch+json' }));
  } else {
    results.push(await expectDoneOrGone(api, `delete pod ${namespace}/${pod}`, { method: 'DELETE', path: podPath }));
    if (options.pvc !== undefined) {
      // A PVC still mounted by a terminating pod is kept (pvc-protection) until the pod is gone, so order is safe.
      const pvc = checkName('PVC', options.pvc.replaceAll('{instance}', pod));
      results.push(await expectDoneOrGone(api, `delete PVC ${namespace}/${pvc}`, { method: 'DELETE', path: `/api/v1/namespaces/${namespace}/persistentvolumeclaims/${pvc}` }));
    }
  }
  process.stdout.write(`${results.join('; ')} (withdrawal ${process.env.BOUNDARY_WITHDRAWAL_ID ?? '?'})\n`);
}

main().catch((err) => {
  process.stderr.write(`release-pod: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = err instanceof UsageError ? 2 : 1;
});
