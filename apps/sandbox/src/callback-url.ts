import { isIP } from 'node:net';

/** Why a callback URL was refused, or undefined when it is acceptable. */
export type CallbackUrlProblem = string | undefined;

/** Whether `hostname` (as `URL#hostname` gives it) is this machine: localhost, 127.0.0.0/8 or ::1. */
export function isLocalHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  if (isIP(host) === 4) return host.startsWith('127.');
  if (isIP(host) === 6) return host === '::1' || host === '0:0:0:0:0:0:0:1';
  return false;
}

/**
 * The spec's rule: a callback URL must be an https address. The sandbox cannot check "publicly reachable", so it
 * enforces the scheme and makes one explicit exception: a local address (http or https) when local callbacks are
 * allowed, because tests and the demo run their receiver on this machine.
 */
export function checkCallbackUrl(raw: string, allowLocal: boolean): CallbackUrlProblem {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return `callbackUrl ${JSON.stringify(raw.slice(0, 200))} is not a URL`;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    return `callbackUrl must be https (got ${url.protocol.replace(/:$/, '')})`;
  }
  if (url.username || url.password) return 'callbackUrl must not carry credentials';
  const local = isLocalHost(url.hostname);
  if (local && !allowLocal) {
    return `callbackUrl ${url.origin} is a local address and local callbacks are not allowed (SANDBOX_ALLOW_LOCAL_CALLBACKS=false)`;
  }
  if (!local && url.protocol !== 'https:') {
    return `callbackUrl must be a publicly reachable https address (got ${url.origin}); plain http is allowed only for local addresses`;
  }
  return undefined;
}
