import { loadConfig, type Config } from '@mcb/core/config';
import { AppError, ErrorCodes } from '@mcb/core/errors';

/** Where a merchant's public key comes from: a public key file, or derived from the merchant's private key. */
export type PublicKeySource = { file: string; derive: false } | { file: string; derive: true };

/** One merchant account of MERCHANTS_FILE, as the sandbox simulates it. */
export interface SandboxEnvMerchant {
  ref: string;
  merchantNo: string;
  /** Derived from the merchant's current (first) private key file. */
  publicKey: PublicKeySource;
}

/**
 * The sandbox's settings, from the one config schema (`@mcb/core/config`, SANDBOX_* variables with their fallbacks
 * on the pipeline's own MERCHANT_NO and MERCHANT_PRIVATE_KEY_FILE, or every merchant of MERCHANTS_FILE). Receives the
 * env from main.ts; reads nothing by itself.
 */
export interface SandboxEnvConfig {
  /** The merchant number simulated (with MERCHANTS_FILE: its first merchant's). */
  merchantNo: string;
  /** Where that merchant's public key comes from. */
  publicKey: PublicKeySource;
  /**
   * With MERCHANTS_FILE, every merchant of it, each an account of its own; `{ref}` in the callback URLs below becomes
   * each one's ref. Unset without MERCHANTS_FILE (one account, as always).
   */
  merchants?: SandboxEnvMerchant[];
  payinCallbackUrl: string | undefined;
  payoutCallbackUrl: string | undefined;
  timeScale: number;
  allowLocalCallbacks: boolean;
  firstAttemptDelayMs: number;
  replyTimeoutMs: number;
}

/** The accounts MERCHANTS_FILE lists; SANDBOX_MERCHANT_NO and SANDBOX_MERCHANT_PUBLIC_KEY_FILE do not go with it. */
function fileMerchants(config: Config): SandboxEnvMerchant[] {
  const problems = (['SANDBOX_MERCHANT_NO', 'SANDBOX_MERCHANT_PUBLIC_KEY_FILE'] as const)
    .filter((name) => config[name] !== undefined)
    .map(
      (name) => `${name}: not used with MERCHANTS_FILE (the sandbox simulates every merchant of the file); unset it`,
    );
  if (config.merchants.length === 0) problems.push('MERCHANTS_FILE: lists no usable merchant');
  if (problems.length > 0) {
    throw new AppError(ErrorCodes.CONFIG_INVALID, `invalid configuration:\n  - ${problems.join('\n  - ')}`, {
      details: { problems },
    });
  }
  return config.merchants.map((m) => ({
    ref: m.ref,
    merchantNo: m.merchantNo,
    publicKey: { file: m.privateKeyFiles[0]!, derive: true as const },
  }));
}

/** The simulator's settings from a loaded config (role sandbox, which requires the merchant and a key). */
export function sandboxSettings(config: Config): SandboxEnvConfig {
  const merchants = config.MERCHANTS_FILE === undefined ? undefined : fileMerchants(config);
  const publicFile = config.SANDBOX_MERCHANT_PUBLIC_KEY_FILE;
  const privateFile = config.MERCHANT_PRIVATE_KEY_FILE?.split(',')[0]?.trim();
  return Object.freeze({
    merchantNo: merchants?.[0]?.merchantNo ?? (config.SANDBOX_MERCHANT_NO ?? config.MERCHANT_NO)!,
    publicKey:
      merchants?.[0]?.publicKey ??
      (publicFile ? { file: publicFile, derive: false as const } : { file: privateFile!, derive: true as const }),
    ...(merchants ? { merchants } : {}),
    payinCallbackUrl: config.SANDBOX_PAYIN_CALLBACK_URL,
    payoutCallbackUrl: config.SANDBOX_PAYOUT_CALLBACK_URL,
    timeScale: config.SANDBOX_TIME_SCALE,
    allowLocalCallbacks: config.SANDBOX_ALLOW_LOCAL_CALLBACKS,
    firstAttemptDelayMs: config.SANDBOX_FIRST_ATTEMPT_DELAY,
    replyTimeoutMs: config.SANDBOX_REPLY_TIMEOUT,
  });
}

/** Parse the environment for the sandbox; throws one CONFIG_INVALID error naming every problem. */
export function loadSandboxConfig(env: Record<string, string | undefined>): SandboxEnvConfig {
  return sandboxSettings(loadConfig(env, 'sandbox'));
}
