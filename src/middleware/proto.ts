// The middleware protocol's definitions (proto/ryno/middleware/v1/middleware.proto) loaded with @grpc/proto-loader,
// only when a service is registered: a boundary without one never loads gRPC. Plus the protocol's constants and the
// google.protobuf.Struct form of a policy entry's config. No sockets.

import { fileURLToPath } from 'node:url';
import type * as Grpc from '@grpc/grpc-js';

/** From src/middleware/ and dist/middleware/ alike, the proto folder is two levels up. */
const PROTO_DIR = fileURLToPath(new URL('../../proto', import.meta.url));
const PROTO_FILE = 'ryno/middleware/v1/middleware.proto';

/** The contract capability both peers must advertise. */
export const CONTRACT_CAPABILITY = 'ryno.supervisor-middleware.contract';
/** What a service lists to be asked about each WebSocket text message by one unary call. */
export const WEBSOCKET_UNARY_CAPABILITY = 'boundary.middleware.websocket-message-unary';
/** Protocol major boundary speaks. */
export const PROTOCOL_MAJOR = 1;

export interface MiddlewareProtocol {
  readonly grpc: typeof Grpc;
  readonly SupervisorMiddleware: Grpc.ServiceClientConstructor;
  readonly HttpResponsePreReturn: Grpc.ServiceClientConstructor;
}

/** Loads gRPC and the definitions; the registry calls it once, on its first registration. */
export async function loadMiddlewareProtocol(): Promise<MiddlewareProtocol> {
  const [grpc, loader] = await Promise.all([import('@grpc/grpc-js'), import('@grpc/proto-loader')]);
  // Enums as their names and 64-bit integers as numbers: results are validated by name, limits are far below 2^53.
  const definition = await loader.load(PROTO_FILE, { includeDirs: [PROTO_DIR], keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    ryno: { middleware: { v1: { SupervisorMiddleware: Grpc.ServiceClientConstructor; HttpResponsePreReturn: Grpc.ServiceClientConstructor } } };
  };
  const v1 = pkg.ryno.middleware.v1;
  return { grpc, SupervisorMiddleware: v1.SupervisorMiddleware, HttpResponsePreReturn: v1.HttpResponsePreReturn };
}

type StructValue =
  | { readonly nullValue: 'NULL_VALUE' }
  | { readonly numberValue: number }
  | { readonly stringValue: string }
  | { readonly boolValue: boolean }
  | { readonly listValue: { readonly values: StructValue[] } }
  | { readonly structValue: Struct };

export interface Struct {
  readonly fields: Record<string, StructValue>;
}

/** A config (plain JSON data, as the policy holds it) as a google.protobuf.Struct. */
export function toStruct(object: Readonly<Record<string, unknown>>): Struct {
  const fields: Record<string, StructValue> = {};
  for (const [key, value] of Object.entries(object)) fields[key] = toValue(value);
  return { fields };
}

function toValue(value: unknown): StructValue {
  if (value === null || value === undefined) return { nullValue: 'NULL_VALUE' };
  if (typeof value === 'number') return { numberValue: value };
  if (typeof value === 'string') return { stringValue: value };
  if (typeof value === 'boolean') return { boolValue: value };
  if (Array.isArray(value)) return { listValue: { values: value.map(toValue) } };
  return { structValue: toStruct(value as Record<string, unknown>) };
}

/** A Struct as plain data (the test services read configs this way). */
export function fromStruct(struct: { readonly fields?: Record<string, unknown> } | null | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(struct?.fields ?? {})) out[key] = fromValue(value as Record<string, unknown>);
  return out;
}

function fromValue(value: Record<string, unknown>): unknown {
  switch (value.kind) {
    case 'numberValue':
    case 'stringValue':
    case 'boolValue':
      return value[value.kind];
    case 'listValue':
      return ((value.listValue as { values?: Record<string, unknown>[] }).values ?? []).map(fromValue);
    case 'structValue':
      return fromStruct(value.structValue as { fields?: Record<string, unknown> });
    default:
      return null;
  }
}
