import { loadConfig, type Config } from '@mcb/core/config';

/**
 * The sandbox's settings, from the one config schema (`@mcb/core/config`, SANDBOX_* variables with their fallbacks
 * on the pipeline's own MERCHANT_NO and MERCHANT_PRIVATE_KEY_FILE). Receives the env from main.ts; reads nothing by
 * itself.
 */
export interface SandboxEnvConfig {
  merchantNo: string;
  /** Where the merchant's public key comes from: a public key file, or derived from the merchant's private key. */
  publicKey: { file: string; derive: false } | { file: string; derive: true };
  payinCallbackUrl: string | undefined;
  payoutCallbackUrl: string | undefined;
  timeScale: number;
  allowLocalCallbacks: boolean;
  firstAttemptDelayMs: number;
  replyTimeoutMs: number;
}

/** The simulator's settings from a loaded config (role sandbox, which requires the merchant and a key). */
export function sandboxSettings(config: Config): SandboxEnvConfig {
  const publicFile = config.SANDBOX_MERCHANT_PUBLIC_KEY_FILE;
  const privateFile = config.MERCHANT_PRIVATE_KEY_FILE?.split(',')[0]?.trim();
  return Object.freeze({
    merchantNo: (config.SANDBOX_MERCHANT_NO ?? config.MERCHANT_NO)!,
    publicKey: publicFile
      ? { file: publicFile, derive: false as const }
      : { file: privateFile!, derive: true as const },
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
