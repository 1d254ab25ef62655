/**
 * The sandbox, the simulated platform of local stacks and tests (docs/sandbox.md); `pnpm sandbox` finds it by
 * SANDBOX_URL.
 */
import { z } from 'zod';
import { bool, boundedDuration, optionalString, port, url } from './fields.ts';

/** The sandbox area of the config schema (composed in index.ts). */
export const sandboxFields = {
  /** Address of the sandbox (the simulated platform; local stacks and tests only). */
  SANDBOX_HOST: z.string().default('127.0.0.1'),
  /** Port of the sandbox. */
  SANDBOX_PORT: port(8090),
  /** The merchant number the sandbox simulates. @defaultValue MERCHANT_NO */
  SANDBOX_MERCHANT_NO: optionalString,
  /**
   * The merchant's public key, to encrypt callbacks.
   * @defaultValue derived from MERCHANT_PRIVATE_KEY_FILE's first file
   */
  SANDBOX_MERCHANT_PUBLIC_KEY_FILE: optionalString,
  /** Where the sandbox POSTs pay-in callbacks (orders may name their own). */
  SANDBOX_PAYIN_CALLBACK_URL: optionalString,
  /** Where the sandbox POSTs payout callbacks. */
  SANDBOX_PAYOUT_CALLBACK_URL: optionalString,
  /** Speed of the simulated platform clock (600: the 2-hour retry schedule in 12 s). */
  SANDBOX_TIME_SCALE: z.coerce.number().positive('expected a number > 0').max(1_000_000).default(1),
  /** Allow callback URLs on this machine or a private network. */
  SANDBOX_ALLOW_LOCAL_CALLBACKS: bool(true),
  /** Delay of a callback's first attempt, in real time. */
  SANDBOX_FIRST_ATTEMPT_DELAY: boundedDuration('1s', 30_000),
  /** How long the sandbox waits for the merchant's reply to one attempt. */
  SANDBOX_REPLY_TIMEOUT: boundedDuration('10s', 600_000),
  /** The sandbox a CLI (`pnpm sandbox`) talks to. */
  SANDBOX_URL: url(['http:', 'https:'], 'http(s)').default('http://127.0.0.1:8090'),
};
