// Histogram buckets of the metric catalogue, from loopback measurements plus real-network headroom
// (docs/metrics.md#buckets). Numbers only: every part that declares a histogram takes its buckets from here.

const ms = (n: number): number => n / 1000;
/** Buckets from loopback measurements plus real-network headroom (docs/metrics.md#buckets). */
export const DECISION_BUCKETS = [ms(0.002), ms(0.005), ms(0.01), ms(0.025), ms(0.05), ms(0.1), ms(0.25), ms(1)];
export const CONNECT_BUCKETS = [ms(0.1), ms(0.25), ms(0.5), ms(1), ms(2.5), ms(5), ms(10), ms(25), ms(50), ms(100), ms(250), ms(500), 1, 2.5, 10];
export const FIRST_BYTE_BUCKETS = [ms(0.25), ms(0.5), ms(1), ms(2.5), ms(5), ms(10), ms(25), ms(50), ms(100), ms(250), ms(500), 1, 2.5, 5, 10, 30];
export const TLS_BUCKETS = [ms(0.5), ms(1), ms(2), ms(3), ms(5), ms(10), ms(25), ms(50), ms(100), ms(250), ms(500), 1, 2.5];
export const DNS_BUCKETS = [ms(0.025), ms(0.05), ms(0.1), ms(0.25), ms(0.5), ms(1), ms(2.5), ms(5), ms(10), ms(25), ms(50), ms(100), ms(250), ms(500), 1, 5];
export const BYTE_BUCKETS = [0, 256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304, 16_777_216, 67_108_864];
