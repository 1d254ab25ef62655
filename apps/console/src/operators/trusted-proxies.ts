import { addressMatcher, type SourceRange } from '@mcb/core/config';

/**
 * Whether a peer address is one of CONSOLE_TRUSTED_PROXIES (IPs or CIDR blocks; IPv4-mapped IPv6 peers count as
 * IPv4).
 */
export type ProxyCheck = (peerAddress: string | undefined) => boolean;

/** A check for CONSOLE_TRUSTED_PROXIES, as the config schema parsed it (the same parser as INGEST_ALLOWED_SOURCES). */
export function trustedProxies(ranges: readonly SourceRange[]): ProxyCheck {
  return addressMatcher(ranges);
}
