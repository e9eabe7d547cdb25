// Stand-ins for the public hosts of the README's walk-through, for test/integration/first-run.test.ts: run as
// `node --import tsx readme-origins.ts CONFIG.json` inside a network namespace the test created. HTTPS on :443
// answers by Host as pypi.org (a simple index), files.pythonhosted.org (one wheel), registry.npmjs.org (one
// packument) and github.com (git's smart HTTP through `git http-backend`); HTTP on :80 answers anything. Every
// request is printed as a JSON line {"hit": {host, method, path}}, so the test sees what reached an origin.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer as createHttp, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttps } from 'node:https';

export interface ReadmeOriginsConfig {
  /** The address both servers listen on. */
  readonly ip: string;
  readonly certFile: string;
  readonly keyFile: string;
  /** A wheel file, served as files.pythonhosted.org/packages/<its name>. */
  readonly wheelFile: string;
  readonly wheelName: string;
  readonly wheelSha256: string;
  /** GIT_PROJECT_ROOT: holds psf/requests.git. */
  readonly gitRoot: string;
  /** The npm package the index lists (left-pad) and its one version. */
  readonly npmPackage: { readonly name: string; readonly version: string };
}

function reply(res: ServerResponse, status: number, type: string, body: string | Buffer): void {
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** git's smart HTTP as CGI: the request body to `git http-backend`, its CGI header block and body back. */
function gitBackend(config: ReadmeOriginsConfig, req: IncomingMessage, res: ServerResponse, url: URL): void {
  const git = spawn('git', ['http-backend'], {
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      GIT_PROJECT_ROOT: config.gitRoot,
      GIT_HTTP_EXPORT_ALL: '1',
      PATH_INFO: url.pathname,
      QUERY_STRING: url.search.slice(1),
      REQUEST_METHOD: req.method ?? 'GET',
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      REMOTE_ADDR: req.socket.remoteAddress ?? '',
      ...(req.headers['content-encoding'] === undefined ? {} : { HTTP_CONTENT_ENCODING: String(req.headers['content-encoding']) }),
      ...(req.headers['git-protocol'] === undefined ? {} : { GIT_PROTOCOL: String(req.headers['git-protocol']) }),
    },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  req.pipe(git.stdin);
  const chunks: Buffer[] = [];
  git.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
  git.on('close', () => {
    const out = Buffer.concat(chunks);
    const end = out.indexOf('\r\n\r\n');
    const head = out.subarray(0, end).toString('latin1').split('\r\n');
    let status = 200;
    const headers: Record<string, string> = {};
    for (const line of head) {
      const colon = line.indexOf(':');
      const [name, value] = [line.slice(0, colon).trim(), line.slice(colon + 1).trim()];
      if (name.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
      else if (name !== '') headers[name] = value;
    }
    const body = out.subarray(end + 4);
    res.writeHead(status, { ...headers, 'content-length': body.length });
    res.end(body);
  });
}

function serveHttps(config: ReadmeOriginsConfig, wheel: Buffer, req: IncomingMessage, res: ServerResponse): void {
  const host = (req.headers.host ?? '').replace(/:\d+$/, '');
  const url = new URL(req.url ?? '/', `https://${host}`);
  const { name, version } = config.npmPackage;
  if (host === 'pypi.org' && req.method === 'GET' && url.pathname === '/simple/requests/') {
    const href = `https://files.pythonhosted.org/packages/${config.wheelName}#sha256=${config.wheelSha256}`;
    reply(res, 200, 'text/html', `<!DOCTYPE html>\n<html><body><a href="${href}">${config.wheelName}</a></body></html>\n`);
  } else if (host === 'files.pythonhosted.org' && req.method === 'GET' && url.pathname === `/packages/${config.wheelName}`) {
    reply(res, 200, 'application/octet-stream', wheel);
  } else if (host === 'registry.npmjs.org' && req.method === 'GET' && url.pathname === `/${name}`) {
    const tarball = `https://registry.npmjs.org/${name}/-/${name}-${version}.tgz`;
    const packument = { name, 'dist-tags': { latest: version }, versions: { [version]: { name, version, dist: { tarball } } } };
    reply(res, 200, 'application/json', JSON.stringify(packument));
  } else if (host === 'github.com' && url.pathname.startsWith('/psf/requests.git/')) {
    gitBackend(config, req, res, url);
  } else {
    reply(res, 404, 'text/plain', `no ${req.method} ${host}${url.pathname} here\n`);
  }
}

function record(req: IncomingMessage): void {
  const hit = { host: (req.headers.host ?? '').replace(/:\d+$/, ''), method: req.method, path: req.url };
  process.stdout.write(`${JSON.stringify({ hit })}\n`);
}

const config = JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8')) as ReadmeOriginsConfig;
const wheel = readFileSync(config.wheelFile);
const https = createHttps({ cert: readFileSync(config.certFile), key: readFileSync(config.keyFile) }, (req, res) => {
  record(req);
  serveHttps(config, wheel, req, res);
});
const http = createHttp((req, res) => {
  record(req);
  reply(res, 200, 'text/plain', 'an origin answered\n');
});
await new Promise<void>((resolve) => https.listen(443, config.ip, resolve));
await new Promise<void>((resolve) => http.listen(80, config.ip, resolve));
process.on('SIGTERM', () => process.exit(0));
process.stdout.write('READY\n');
