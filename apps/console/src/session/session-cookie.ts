import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

/** Name of the console's session cookie. */
export const SESSION_COOKIE = 'mcb_console_session';

/** Options of {@link createSessionCodec}. */
export interface SessionCodecOptions {
  /**
   * The secret the signing key is derived from: CONSOLE_SESSION_SECRET, else CONSOLE_TOKEN (rotating it ends every
   * session); main.ts passes a random one when neither is set.
   */
  secret: string;
  /** How long a session lasts after login, in ms (fixed, not sliding). @defaultValue 14400000 (4 h) */
  ttlMs?: number;
  /** Clock, in ms since the epoch. @defaultValue Date.now */
  now?: () => number;
}

/**
 * Issues and checks stateless signed session values, each naming its operator:
 * `v2.<expires, unix s>.<operator name, base64url>.<nonce>.<HMAC-SHA256>`.
 */
export interface SessionCodec {
  readonly ttlMs: number;
  issue(operatorName: string): { value: string; expiresAt: Date };
  /** The operator's name for a value this codec signed that has not expired, else undefined. Constant-time on the MAC. */
  verify(value: string | undefined): string | undefined;
}

const b64url = (buf: Buffer) => buf.toString('base64url');

/**
 * A session codec keyed by HKDF-SHA256(secret). Every console instance with the same secret accepts the same
 * sessions; the cookie reveals nothing about the secret (a MAC is one-way) and cannot be extended, forged or moved to
 * another operator without the key. The role is not in the cookie: it is looked up by name on every request, so an
 * operator removed from the file (and restarted console) loses their session at once. Otherwise a session cannot be
 * revoked before it expires: the expiry is kept short, and rotating the secret ends them all.
 */
export function createSessionCodec(options: SessionCodecOptions): SessionCodec {
  const key = Buffer.from(hkdfSync('sha256', options.secret, 'mcb-console-session', 'session-mac-v1', 32));
  const ttlMs = options.ttlMs ?? 4 * 3600_000;
  const now = options.now ?? Date.now;
  const mac = (payload: string) => createHmac('sha256', key).update(payload).digest();

  return {
    ttlMs,
    issue(operatorName) {
      const expires = Math.floor((now() + ttlMs) / 1000);
      const payload = `v2.${expires}.${b64url(Buffer.from(operatorName, 'utf8'))}.${b64url(randomBytes(16))}`;
      return { value: `${payload}.${b64url(mac(payload))}`, expiresAt: new Date(expires * 1000) };
    },
    verify(value) {
      if (!value || value.length > 400) return undefined;
      const match = /^(v2\.(\d{1,12})\.([A-Za-z0-9_-]{1,172})\.[A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/.exec(value);
      if (!match) return undefined;
      const given = Buffer.from(match[4]!, 'base64url');
      const expected = mac(match[1]!);
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
      if (Number(match[2]) * 1000 <= now()) return undefined;
      return Buffer.from(match[3]!, 'base64url').toString('utf8');
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
