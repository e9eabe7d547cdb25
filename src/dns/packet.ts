// dns-packet, loaded with require(): imported as ESM, this CommonJS package cost ~9 MB more RSS in every
// sidecar than the same code loaded by require (bench/memory.sh, issue 15). The types stay the package's. A module
// `require` of this form is what scripts/bundle.ts lets the image's bundle carry the package in.

import { createRequire } from 'node:module';
import type * as DnsPacket from 'dns-packet';

export type { DecodedPacket, StringAnswer } from 'dns-packet';

const require = createRequire(import.meta.url);
const dnsPacket = require('dns-packet') as typeof DnsPacket;

export const { decode: decodePacket, encode: encodePacket, RECURSION_DESIRED } = dnsPacket;
