// Attached mode's client certificates and placeholder formats (docs/credentials.md#client-certificates,
// #shaped-placeholders): what the supervisor sends for a provider, turned back into what a credentials file gives,
// with the same checks. The wire shape is control/messages.ts's WireProvider; this folder never imports control/.

import { BoundaryError, type Issue } from '../shared/errors.js';
import { type ClientCertificate, clientCertificateFromPem } from './client-cert.js';
import { SHORTEST_MARKER_CHARS } from './placeholder.js';
import { compileFormat, type PlaceholderFormat } from './shaped.js';

/** What a provider carries on the control channel beside its env and endpoints. */
export interface DeliveredExtras {
  readonly clientCertificatePem?: { readonly certChain: string; readonly key: string } | undefined;
  readonly formatIds?: Readonly<Record<string, string>> | undefined;
}

/** The wire form of a provider's certificate and formats (the supervisor's side). */
export function deliveryOf(provider: { readonly clientCertificate: ClientCertificate | undefined; readonly formats: ReadonlyMap<string, PlaceholderFormat> }): {
  clientCertificatePem?: { readonly certChain: string; readonly key: string };
  formatIds?: Readonly<Record<string, string>>;
} {
  const certificate = provider.clientCertificate;
  return {
    // The one place a certificate's key leaves its Secret: serialised for the mTLS channel to the boundary.
    ...(certificate === undefined ? {} : { clientCertificatePem: { certChain: certificate.certChainPem, key: certificate.key.reveal() } }),
    ...(provider.formats.size === 0 ? {} : { formatIds: Object.fromEntries([...provider.formats].map(([key, format]) => [key, format.id])) }),
  };
}

/** A format by the id shaped.ts gave it: a catalogue name, or `custom:<prefix>:<length>:<alphabet>`. */
function formatFromId(id: string): ReturnType<typeof compileFormat> {
  const custom = /^custom:([^:]*):([0-9]{1,4}):([a-z0-9-]+)$/.exec(id);
  if (custom === null) return compileFormat(id, SHORTEST_MARKER_CHARS);
  return compileFormat({ prefix: custom[1] ?? '', length: Number(custom[2]), alphabet: custom[3] ?? '' }, SHORTEST_MARKER_CHARS);
}

/** The certificate and formats of a delivered provider; problems go to `issues` (the whole push is then refused). */
export function fromDelivery(input: DeliveredExtras, base: string, issues: Issue[]): { clientCertificate?: ClientCertificate; formats?: Record<string, PlaceholderFormat> } {
  const out: { clientCertificate?: ClientCertificate; formats?: Record<string, PlaceholderFormat> } = {};
  if (input.clientCertificatePem !== undefined) {
    try {
      out.clientCertificate = clientCertificateFromPem(input.clientCertificatePem.certChain, input.clientCertificatePem.key);
    } catch (err) {
      if (!(err instanceof BoundaryError)) throw err;
      issues.push({ code: err.code, path: `${base}.client_certificate`, message: err.message });
    }
  }
  if (input.formatIds !== undefined) {
    const formats: Record<string, PlaceholderFormat> = {};
    for (const [key, id] of Object.entries(input.formatIds)) {
      const compiled = formatFromId(id);
      if (compiled.ok) formats[key] = compiled.format;
      else issues.push({ code: 'CREDENTIALS_FORMAT_INVALID', path: `${base}.env.${key}.format`, message: compiled.message });
    }
    out.formats = formats;
  }
  return out;
}
