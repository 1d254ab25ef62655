import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

/** Name of the console's session cookie. */
export const SESSION_COOKIE = 'mcb_console_session';

/** Options of {@link createSessionCodec}. */
export interface SessionCodecOptions {
  /** CONSOLE_TOKEN: the signing key is derived from it, so rotating the token ends every session. */
  token: string;
  /** How long a session lasts after login, in ms (fixed, not sliding). @defaultValue 14400000 (4 h) */
  ttlMs?: number;
  /** Clock, in ms since the epoch. @defaultValue Date.now */
  now?: () => number;
}

/** Issues and checks stateless signed session values: `v1.<expires, unix s>.<nonce>.<HMAC-SHA256>`. */
export interface SessionCodec {
  readonly ttlMs: number;
  issue(): { value: string; expiresAt: Date };
  /** True for a value this codec signed that has not expired. Constant-time on the MAC. */
  verify(value: string | undefined): boolean;
}

const b64url = (buf: Buffer) => buf.toString('base64url');

/**
 * A session codec keyed by HKDF-SHA256(CONSOLE_TOKEN). Every console instance with the same token accepts the
 * same sessions; the cookie reveals nothing about the token (a MAC is one-way) and cannot be extended or forged
 * without the key. A session cannot be revoked server-side before it expires: the expiry is kept short, and
 * rotating CONSOLE_TOKEN ends them all.
 */
export function createSessionCodec(options: SessionCodecOptions): SessionCodec {
  const key = Buffer.from(hkdfSync('sha256', options.token, 'mcb-console-session', 'session-mac-v1', 32));
  const ttlMs = options.ttlMs ?? 4 * 3600_000;
  const now = options.now ?? Date.now;
  const mac = (payload: string) => createHmac('sha256', key).update(payload).digest();

  return {
    ttlMs,
    issue() {
      const expires = Math.floor((now() + ttlMs) / 1000);
      const payload = `v1.${expires}.${b64url(randomBytes(16))}`;
      return { value: `${payload}.${b64url(mac(payload))}`, expiresAt: new Date(expires * 1000) };
    },
    verify(value) {
      if (!value || value.length > 200) return false;
      const match = /^(v1\.(\d{1,12})\.[A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/.exec(value);
      if (!match) return false;
      const given = Buffer.from(match[3]!, 'base64url');
      const expected = mac(match[1]!);
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return false;
      return Number(match[2]) * 1000 > now();
    },
  };
}

/** The value of one cookie from a Cookie header, or undefined. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** A Set-Cookie value for the session: HttpOnly, SameSite=Strict, Path=/, Secure when asked. */
export function sessionSetCookie(value: string, maxAgeSeconds: number, secure: boolean): string {
  return [`${SESSION_COOKIE}=${value}`, 'Path=/', `Max-Age=${maxAgeSeconds}`, 'HttpOnly', 'SameSite=Strict', ...(secure ? ['Secure'] : [])].join('; ');
}
