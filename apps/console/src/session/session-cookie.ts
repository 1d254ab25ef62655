import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';

/** Name of the console's session cookie. */
export const SESSION_COOKIE = 'mcb_console_session';

/** Options of {@link createSessionCodec}. */
export interface SessionCodecOptions {
  /**
   * The secret the signing key is derived from: CONSOLE_SESSION_SECRET, else a random one per process (app.ts).
   * Never a bearer token: whoever holds the key can mint a session for any operator.
   */
  secret: string;
  /** How long a session lasts after login, in ms (fixed, not sliding). @defaultValue 14400000 (4 h) */
  ttlMs?: number;
  /** Clock, in ms since the epoch. @defaultValue Date.now */
  now?: () => number;
}

/** What a valid session value says. */
export interface SessionClaims {
  /** The operator's name. */
  name: string;
  /** The session's id (its random nonce): what logout revokes. */
  id: string;
  /** When it ends, ms since the epoch. */
  expiresAt: number;
  /** Tag of the operator's credential at login (see {@link SessionCodec.binds}). */
  binding: string;
}

/**
 * Issues and checks signed session values, each naming its operator and bound to their credential:
 * `v3.<expires, unix s>.<operator name, base64url>.<credential tag>.<nonce>.<HMAC-SHA256>`.
 */
export interface SessionCodec {
  readonly ttlMs: number;
  /** A session for `operatorName`, bound to `credential` (the SHA-256 of the token they logged in with). */
  issue(operatorName: string, credential: string): { value: string; expiresAt: Date; id: string };
  /**
   * The claims of a value this codec signed that has not expired and does not outlive the session lifetime (a value
   * claiming a later expiry was not issued by this console), else undefined. Constant-time on the MAC.
   */
  verify(value: string | undefined): SessionClaims | undefined;
  /** Whether the session was issued for this credential: false once the operator's token is rotated or removed. */
  binds(claims: SessionClaims, credential: string): boolean;
}

const b64url = (buf: Buffer) => buf.toString('base64url');

/** Clock difference tolerated between consoles sharing a secret, on the "not later than the lifetime" check. */
const CLOCK_SKEW_MS = 60_000;

/**
 * A session codec keyed by HKDF-SHA256(secret). Every console instance with the same secret accepts the same
 * sessions; the cookie reveals nothing about the secret (a MAC is one-way) and cannot be extended, forged or moved to
 * another operator without the key. The role is not in the cookie: it is looked up by name on every request. The
 * operator's credential is bound in (a keyed tag of their token's SHA-256), so rotating or removing their token in
 * the operators file (and restarting) ends their sessions; logout revokes one (session/revocations.ts).
 */
export function createSessionCodec(options: SessionCodecOptions): SessionCodec {
  const key = Buffer.from(hkdfSync('sha256', options.secret, 'mcb-console-session', 'session-mac-v3', 32));
  const ttlMs = options.ttlMs ?? 4 * 3600_000;
  const now = options.now ?? Date.now;
  const mac = (payload: string) => createHmac('sha256', key).update(payload).digest();
  const tag = (credential: string) =>
    b64url(createHmac('sha256', key).update(`credential:${credential}`).digest().subarray(0, 16));

  return {
    ttlMs,
    issue(operatorName, credential) {
      const expires = Math.floor((now() + ttlMs) / 1000);
      const id = b64url(randomBytes(16));
      const payload = `v3.${expires}.${b64url(Buffer.from(operatorName, 'utf8'))}.${tag(credential)}.${id}`;
      return { value: `${payload}.${b64url(mac(payload))}`, expiresAt: new Date(expires * 1000), id };
    },
    verify(value) {
      if (!value || value.length > 400) return undefined;
      const match =
        /^(v3\.(\d{1,12})\.([A-Za-z0-9_-]{1,172})\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{22}))\.([A-Za-z0-9_-]{43})$/.exec(
          value,
        );
      if (!match) return undefined;
      const given = Buffer.from(match[6]!, 'base64url');
      const expected = mac(match[1]!);
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
      const expiresAt = Number(match[2]) * 1000;
      const t = now();
      if (expiresAt <= t || expiresAt > t + ttlMs + CLOCK_SKEW_MS) return undefined;
      return {
        name: Buffer.from(match[3]!, 'base64url').toString('utf8'),
        id: match[5]!,
        expiresAt,
        binding: match[4]!,
      };
    },
    binds(claims, credential) {
      const a = Buffer.from(claims.binding);
      const b = Buffer.from(tag(credential));
      return a.length === b.length && timingSafeEqual(a, b);
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
  return [
    `${SESSION_COOKIE}=${value}`,
    'Path=/',
    `Max-Age=${maxAgeSeconds}`,
    'HttpOnly',
    'SameSite=Strict',
    ...(secure ? ['Secure'] : []),
  ].join('; ');
}
