// HPACK (RFC 7541) for the upstream HTTP/2 client: a strict, bounded decoder for response header blocks from
// untrusted origins (the encoder is hpack-encode.ts). Pure codec: no frames, no sockets, and no checks on field
// names or values (the caller applies RFC 9113 §8.2).

import { BoundaryError } from '../shared/errors.js';
import { HUFFMAN_CODES, HUFFMAN_EOS } from './hpack-huffman.js';
import { type Latin1Buffer, STATIC_COUNT, STATIC_NAMES, STATIC_VALUES } from './hpack-table.js';

/** SETTINGS_HEADER_TABLE_SIZE boundary advertises (the protocol default): the most the origin's encoder may use. */
export const HPACK_MAX_TABLE_BYTES = 4_096;
/** RFC 9113 §6.5.2 / RFC 7541 §4.1: each field's size is name + value + 32 octets. */
export const HPACK_ENTRY_OVERHEAD = 32;
/** RFC 7541 §5.1 allows a decoder a limit: integers above 2^31-1 are refused (no index, length or size gets close). */
export const HPACK_MAX_INTEGER = 0x7fff_ffff;
/** 2^31-1 fits in 5 continuation octets after a full prefix; a sixth is padding an attacker sent, not a value. */
export const HPACK_MAX_INTEGER_CONTINUATION_BYTES = 5;

// Huffman decoding, four bits at a time: a state is an internal node of the code tree (257 leaves, so exactly 256
// of them, 0 the root), and each (state, nibble) entry holds the next state, the octet completed on the way (at most
// one: no code is shorter than 5 bits), whether stopping there is allowed, and whether EOS was decoded.
const HUFFMAN_EMIT = 1 << 16;
const HUFFMAN_ACCEPT = 1 << 17;
const HUFFMAN_FAIL = 1 << 18;
/** §5.2: padding is the most significant bits of EOS (all 1s) and shorter than 8 bits. */
const HUFFMAN_MAX_PADDING_BITS = 7;
const HUFFMAN_DECODE = buildHuffmanDecoder();

function buildHuffmanDecoder(): Uint32Array {
  // Children: >= 0 is an internal node, < 0 is the leaf of symbol -(child + 1); 0 before it is set (never a child).
  const zero = new Int16Array(256);
  const one = new Int16Array(256);
  const depth = new Uint8Array(256);
  const allOnes = new Uint8Array(256);
  allOnes[0] = 1;
  let nodes = 1;
  for (let symbol = 0; symbol <= HUFFMAN_EOS; symbol++) {
    const code = HUFFMAN_CODES[2 * symbol]!;
    const bits = HUFFMAN_CODES[2 * symbol + 1]!;
    let node = 0;
    for (let bit = bits - 1; bit >= 0; bit--) {
      const children = (code >>> bit) & 1 ? one : zero;
      if (bit === 0) {
        children[node] = -(symbol + 1);
      } else {
        if (children[node] === 0) {
          if (nodes === 256) throw new Error('HPACK Huffman table is not a complete prefix code');
          depth[nodes] = depth[node]! + 1;
          allOnes[nodes] = children === one ? allOnes[node]! : 0;
          children[node] = nodes++;
        }
        node = children[node]!;
      }
    }
  }
  const table = new Uint32Array(256 * 16);
  for (let state = 0; state < 256; state++) {
    for (let nibble = 0; nibble < 16; nibble++) {
      let node = state;
      let entry = 0;
      for (let bit = 3; bit >= 0; bit--) {
        const child = ((nibble >>> bit) & 1 ? one : zero)[node]!;
        if (child >= 0) {
          node = child;
        } else if (-(child + 1) === HUFFMAN_EOS) {
          entry |= HUFFMAN_FAIL;
          break;
        } else {
          entry |= HUFFMAN_EMIT | (-(child + 1) << 8);
          node = 0;
        }
      }
      const accept = node === 0 || (allOnes[node] === 1 && depth[node]! <= HUFFMAN_MAX_PADDING_BITS);
      table[state * 16 + nibble] = entry | node | (accept ? HUFFMAN_ACCEPT : 0);
    }
  }
  return table;
}


const EMPTY = Buffer.alloc(0) as Latin1Buffer;
const HUFFMAN_SCRATCH_INITIAL_BYTES = 256;

/** Up to this length a string is made from its codes in JavaScript, past it through latin1Slice (measured crossover ~8). */
const SHORT_READ_CHARS = 8;

function latin1(b: Latin1Buffer, s: number, end: number): string {
  // One string made at once from its codes: a join per character would make a string per character.
  switch (end - s) {
    case 0:
      return '';
    case 1:
      return String.fromCharCode(b[s]!);
    case 2:
      return String.fromCharCode(b[s]!, b[s + 1]!);
    case 3:
      return String.fromCharCode(b[s]!, b[s + 1]!, b[s + 2]!);
    case 4:
      return String.fromCharCode(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!);
    case 5:
      return String.fromCharCode(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!);
    case 6:
      return String.fromCharCode(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!);
    case 7:
      return String.fromCharCode(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!);
    case SHORT_READ_CHARS:
      return String.fromCharCode(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!);
    default:
      return b.latin1Slice(s, end);
  }
}

function fail(message: string): never {
  throw new BoundaryError('UPSTREAM_PROTOCOL_ERROR', `HPACK: ${message}`);
}

/**
 * The decoding context of one connection (RFC 7541 §2.2): one instance per connection, fed every header block in
 * the order received. After a throw its table is out of step with the peer's, and the connection must end.
 */
export class HpackDecoder {
  readonly #limit: number;
  #maxSize: number;
  #size = 0;
  // The dynamic table as a ring: #head is the newest entry's slot, dynamic index k sits k - 1 slots before it.
  readonly #capacity: number;
  readonly #names: string[];
  readonly #values: string[];
  #head = 0;
  #count = 0;
  #block: Latin1Buffer = EMPTY;
  #pos = 0;
  #scratch = Buffer.allocUnsafe(HUFFMAN_SCRATCH_INITIAL_BYTES) as Latin1Buffer;

  constructor(maxTableBytes: number = HPACK_MAX_TABLE_BYTES) {
    if (!Number.isInteger(maxTableBytes) || maxTableBytes < 0 || maxTableBytes > HPACK_MAX_INTEGER) {
      throw new RangeError(`maxTableBytes must be an integer 0-${HPACK_MAX_INTEGER}, got ${maxTableBytes}`);
    }
    this.#limit = maxTableBytes;
    this.#maxSize = maxTableBytes;
    // Every entry costs at least the overhead, so no more than this many fit at once.
    this.#capacity = Math.max(1, Math.floor(maxTableBytes / HPACK_ENTRY_OVERHEAD));
    this.#names = new Array<string>(this.#capacity).fill('');
    this.#values = new Array<string>(this.#capacity).fill('');
  }

  /** The dynamic table's size in octets as RFC 7541 §4.1 counts it. */
  get tableSize(): number {
    return this.#size;
  }

  /**
   * Decodes one complete header block (HEADERS + CONTINUATION fragments already joined) into a flat list
   * [name, value, name, value, ...] in wire order, names and values as latin1 strings exactly as sent (no lower-casing,
   * no validation of characters: the caller checks RFC 9113 rules). Returns undefined when the decoded list's size
   * (sum of name.length + value.length + 32) exceeds maxListBytes: the block is still decoded to the end so the
   * dynamic table stays in step with the encoder (RFC 9113 §4.3), only the list is dropped.
   * Throws BoundaryError('UPSTREAM_PROTOCOL_ERROR') on any decoding error (a COMPRESSION_ERROR for the connection).
   */
  decode(block: Buffer, maxListBytes: number): string[] | undefined {
    this.#block = block as Latin1Buffer;
    this.#pos = 0;
    try {
      return this.#decodeFields(maxListBytes);
    } finally {
      this.#block = EMPTY;
    }
  }

  #decodeFields(maxListBytes: number): string[] | undefined {
    const block = this.#block;
    let list: string[] | undefined = [];
    let listBytes = 0;
    let sawField = false;
    while (this.#pos < block.length) {
      const first = block[this.#pos]!;
      let name: string;
      let value: string;
      if (first & 0x80) {
        const index = this.#readInteger(7);
        if (index === 0) fail('indexed field with index 0');
        if (index <= STATIC_COUNT) {
          name = STATIC_NAMES[index]!;
          value = STATIC_VALUES[index]!;
        } else {
          const slot = this.#slot(index);
          name = this.#names[slot]!;
          value = this.#values[slot]!;
        }
      } else if ((first & 0xe0) === 0x20) {
        // §4.2: only at the start of a block; the encoder may send several (a dip to 0, then the new size).
        if (sawField) fail('dynamic table size update after a field');
        const size = this.#readInteger(5);
        if (size > this.#limit) fail(`dynamic table size update to ${size} above the ${this.#limit} allowed`);
        this.#maxSize = size;
        this.#evictTo(size);
        continue;
      } else {
        // 01xxxxxx: incremental indexing (6-bit prefix); 0000xxxx and 0001xxxx: not inserted (4-bit prefix).
        const indexing = (first & 0xc0) === 0x40;
        const nameIndex = this.#readInteger(indexing ? 6 : 4);
        if (nameIndex === 0) name = this.#readString();
        else if (nameIndex <= STATIC_COUNT) name = STATIC_NAMES[nameIndex]!;
        else name = this.#names[this.#slot(nameIndex)]!;
        value = this.#readString();
        if (indexing) this.#insert(name, value);
      }
      sawField = true;
      if (list !== undefined) {
        listBytes += name.length + value.length + HPACK_ENTRY_OVERHEAD;
        // Dropped, not thrown: the rest of the block must still be applied to the table.
        if (listBytes > maxListBytes) list = undefined;
        else list.push(name, value);
      }
    }
    return list;
  }

  /** §5.1, with the prefix in the low `prefixBits` bits of the octet at #pos. */
  #readInteger(prefixBits: number): number {
    const block = this.#block;
    if (this.#pos >= block.length) fail('block ends before an integer');
    const max = (1 << prefixBits) - 1;
    let value = block[this.#pos++]! & max;
    if (value < max) return value;
    let scale = 1;
    for (let i = 0; i < HPACK_MAX_INTEGER_CONTINUATION_BYTES; i++) {
      if (this.#pos >= block.length) fail('block ends inside an integer');
      const octet = block[this.#pos++]!;
      value += (octet & 0x7f) * scale;
      if ((octet & 0x80) === 0) {
        if (value > HPACK_MAX_INTEGER) fail(`integer ${value} above ${HPACK_MAX_INTEGER}`);
        return value;
      }
      scale *= 128;
    }
    return fail(`integer longer than ${HPACK_MAX_INTEGER_CONTINUATION_BYTES} continuation octets`);
  }

  /** §5.2: H bit, 7-bit prefix length, then the octets, raw or Huffman-coded. */
  #readString(): string {
    const block = this.#block;
    const huffman = this.#pos < block.length && (block[this.#pos]! & 0x80) !== 0;
    const length = this.#readInteger(7);
    const start = this.#pos;
    if (length > block.length - start) fail(`string of ${length} octets past the end of the block`);
    this.#pos = start + length;
    return huffman ? this.#decodeHuffman(start, this.#pos) : latin1(block, start, this.#pos);
  }

  #decodeHuffman(start: number, end: number): string {
    const block = this.#block;
    // Every symbol takes at least 5 bits, which bounds the output by the input.
    const most = Math.floor(((end - start) * 8) / 5);
    if (this.#scratch.length < most) this.#scratch = Buffer.allocUnsafe(Math.max(most, 2 * this.#scratch.length)) as Latin1Buffer;
    const out = this.#scratch;
    let n = 0;
    let state = 0;
    let entry = HUFFMAN_ACCEPT;
    for (let i = start; i < end; i++) {
      const octet = block[i]!;
      entry = HUFFMAN_DECODE[(state << 4) | (octet >>> 4)]!;
      if (entry & HUFFMAN_FAIL) fail('EOS inside a Huffman-coded string');
      if (entry & HUFFMAN_EMIT) out[n++] = (entry >>> 8) & 0xff;
      state = entry & 0xff;
      entry = HUFFMAN_DECODE[(state << 4) | (octet & 0x0f)]!;
      if (entry & HUFFMAN_FAIL) fail('EOS inside a Huffman-coded string');
      if (entry & HUFFMAN_EMIT) out[n++] = (entry >>> 8) & 0xff;
      state = entry & 0xff;
    }
    if ((entry & HUFFMAN_ACCEPT) === 0) fail('Huffman padding longer than 7 bits or not all 1s');
    return latin1(out, 0, n);
  }

  /** The ring slot of dynamic-table wire index `index` (> 61), O(1). */
  #slot(index: number): number {
    const k = index - STATIC_COUNT;
    if (k > this.#count) fail(`index ${index} past the ${STATIC_COUNT} + ${this.#count} table entries`);
    return (this.#head - k + 1 + this.#capacity) % this.#capacity;
  }

  /** §4.4: evict oldest first to make room; an entry larger than the table empties it and is not added. */
  #insert(name: string, value: string): void {
    const size = name.length + value.length + HPACK_ENTRY_OVERHEAD;
    if (size > this.#maxSize) {
      this.#evictTo(0);
      return;
    }
    this.#evictTo(this.#maxSize - size);
    this.#head = (this.#head + 1) % this.#capacity;
    this.#names[this.#head] = name;
    this.#values[this.#head] = value;
    this.#count++;
    this.#size += size;
  }

  #evictTo(bytes: number): void {
    while (this.#size > bytes) {
      const oldest = (this.#head - this.#count + 1 + this.#capacity) % this.#capacity;
      this.#size -= this.#names[oldest]!.length + this.#values[oldest]!.length + HPACK_ENTRY_OVERHEAD;
      this.#names[oldest] = '';
      this.#values[oldest] = '';
      this.#count--;
    }
  }
}

