/**
 * Source address ranges (INGEST_ALLOWED_SOURCES): `10.0.0.0/8, 203.0.113.7, 2001:db8::/32, ::1`. A bare address is
 * one host (/32 or /128). A range with host bits set (`10.0.0.5/8`) is refused: it is a typo for either `10.0.0.0/8`
 * or `10.0.0.5/32`, and guessing which would open or close the listener to the wrong senders.
 */
import { BlockList, isIPv4, isIPv6 } from 'node:net';

/** One range, as `net.BlockList.addSubnet` takes it. */
export interface SourceRange {
  address: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

/** The eight 16-bit groups of an IPv6 address (with an embedded IPv4 tail spelled out); undefined if not IPv6. */
export function ipv6Groups(address: string): number[] | undefined {
  if (!isIPv6(address)) return undefined;
  let text = address.split('%')[0]!;
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const part = (s: string | undefined) => (s ? s.split(':').map((g) => parseInt(g, 16)) : []);
  const left = part(head);
  const right = part(tail);
  return tail === undefined ? left : [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
}

function ipv4Bytes(address: string): number[] {
  return address.split('.').map(Number);
}

/** Whether any bit after `prefix` is set in `bits` (big-endian words of `width` bits each). */
function hostBitsSet(words: number[], width: number, prefix: number): boolean {
  return words.some((w, i) => {
    const keep = Math.min(width, Math.max(0, prefix - i * width));
    const mask = keep === 0 ? 0 : ((1 << width) - 1) ^ ((1 << (width - keep)) - 1);
    return (w & ~mask & ((1 << width) - 1)) !== 0;
  });
}

/** The ranges of a comma-separated list, or the first problem as a sentence naming the bad entry. */
export function parseSourceRanges(text: string): SourceRange[] | string {
  const ranges: SourceRange[] = [];
  for (const raw of text.split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    const [address = '', prefixText, extra] = entry.split('/');
    const family = isIPv4(address) ? 'ipv4' : isIPv6(address) ? 'ipv6' : undefined;
    if (!family || extra !== undefined) return `${JSON.stringify(entry)} is not an IPv4 or IPv6 address or CIDR range`;
    const width = family === 'ipv4' ? 32 : 128;
    if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText))
      return `${JSON.stringify(entry)}: the prefix length must be a number from 0 to ${width}`;
    const prefix = prefixText === undefined ? width : Number(prefixText);
    if (prefix > width) return `${JSON.stringify(entry)}: the prefix length must be a number from 0 to ${width}`;
    const words = family === 'ipv4' ? ipv4Bytes(address) : ipv6Groups(address)!;
    if (hostBitsSet(words, family === 'ipv4' ? 8 : 16, prefix)) {
      return `${JSON.stringify(entry)} has bits set after the /${prefix} prefix: write the network address, or /${width} for one host`;
    }
    ranges.push({ address, prefix, family });
  }
  return ranges;
}

/**
 * Whether an address is in one of `ranges` (INGEST_ALLOWED_SOURCES, CONSOLE_TRUSTED_PROXIES). An IPv4 address that
 * arrives IPv4-mapped (`::ffff:10.0.0.7`, on a listener bound to `::`) matches the IPv4 ranges: BlockList does that.
 */
export function addressMatcher(ranges: readonly SourceRange[]): (address: string | undefined) => boolean {
  const blocks = new BlockList();
  for (const r of ranges) blocks.addSubnet(r.address, r.prefix, r.family);
  return (address) => !!address && blocks.check(address, isIPv4(address) ? 'ipv4' : 'ipv6');
}
