/**
 * The platform and who we are to it: our merchant number and key, where the platform lives, how Get order and the
 * payment-method catalog are asked. Worker and console call the platform; ingest decrypts with the key.
 */
import { z } from 'zod';
import { GET_ORDER_PATH } from '../platform/get-order.ts';
import { bool, duration, optionalString, optionalUrl, type ValuesOf } from './fields.ts';
import type { AppRole } from './role.ts';

/** The platform area of the config schema (composed in index.ts). */
export const platformFields = {
  /** Our merchant number, as the platform knows it. */
  MERCHANT_NO: optionalString,
  /** Comma-separated PEM private key files; the first is current, the others are tried during a rotation. */
  MERCHANT_PRIVATE_KEY_FILE: optionalString,
  /** The platform's `{base_url}`. */
  PLATFORM_BASE_URL: optionalUrl(['http:', 'https:'], 'http(s)'),
  /**
   * Accept an `http://` PLATFORM_BASE_URL (local stacks, the demo, tests). Get order is the only thing that makes an
   * unsigned callback trustworthy, so production requires https; with this set, every start warns. Never read from a
   * `.env` file (scripts/lib/env-file.ts); an operator's command (role `cli`) may reach a loopback platform without it.
   */
  PLATFORM_ALLOW_HTTP: bool(false),
  /** Path of Get order under the base URL (the spec does not show it). */
  PLATFORM_GET_ORDER_PATH: z.string().startsWith('/').default(GET_ORDER_PATH),
  /** Body encoding of getPaymentMethods: `json` or `form`. */
  PLATFORM_CONTENT_TYPE: z.enum(['json', 'form']).default('json'),
  /** Overall deadline of one platform request. */
  PLATFORM_TIMEOUT: duration('10s'),
};

/** Whether a URL's host is this machine (127.0.0.0/8, ::1, localhost). */
function isLoopbackUrl(raw: string): boolean {
  const host = new URL(raw).hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * Get order is what confirms an unsigned callback, so it travels over https unless PLATFORM_ALLOW_HTTP says
 * otherwise. `named`: the problems found so far (a PLATFORM_BASE_URL already named is not named twice).
 */
export function platformProblems(
  values: ValuesOf<typeof platformFields>,
  role: AppRole,
  named: readonly string[],
): string[] {
  if (
    values.PLATFORM_BASE_URL?.startsWith('http:') &&
    !values.PLATFORM_ALLOW_HTTP &&
    // An operator's command (`pnpm cli`, `pnpm sandbox`) confirms no callback; to a platform on this machine (the local
    // sandbox) its requests never leave the host. Worker and console still need the explicit PLATFORM_ALLOW_HTTP.
    !(role === 'cli' && isLoopbackUrl(values.PLATFORM_BASE_URL)) &&
    !named.some((p) => p.startsWith('PLATFORM_BASE_URL:'))
  ) {
    return [
      'PLATFORM_BASE_URL: expected an https URL: Get order is what confirms an unsigned callback, ' +
        'so it must not travel in clear; set PLATFORM_ALLOW_HTTP=true for a local stack',
    ];
  }
  return [];
}

/** The platform's settings that are allowed but unsafe in production. */
export function platformWarnings(values: ValuesOf<typeof platformFields>): string[] {
  return values.PLATFORM_ALLOW_HTTP && values.PLATFORM_BASE_URL?.startsWith('http:')
    ? [
        'PLATFORM_ALLOW_HTTP=true: Get order goes over plain http; ' +
          'anyone on that path could confirm a forged callback (local stacks only)',
      ]
    : [];
}
