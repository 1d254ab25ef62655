import { parseDuration } from '@mcb/core/config';
import { AppError, ErrorCodes } from '@mcb/core/errors';

/**
 * The sandbox's own environment (SANDBOX_* variables; SANDBOX_HOST, SANDBOX_PORT and LOG_LEVEL come from the core
 * config). Kept here rather than in the shared schema because only the simulator reads them. Receives the env
 * from main.ts; reads nothing by itself.
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

const TRUE = ['true', '1', 'yes'];
const FALSE = ['false', '0', 'no'];

/** Parse the SANDBOX_* variables; throws one CONFIG_INVALID error naming every problem. */
export function loadSandboxConfig(env: Record<string, string | undefined>): SandboxEnvConfig {
  const problems: string[] = [];
  const text = (name: string) => {
    const v = env[name]?.trim();
    return v === '' ? undefined : v;
  };

  const merchantNo = text('SANDBOX_MERCHANT_NO') ?? text('MERCHANT_NO');
  if (!merchantNo) problems.push('SANDBOX_MERCHANT_NO: required (or MERCHANT_NO) (unset)');

  const publicFile = text('SANDBOX_MERCHANT_PUBLIC_KEY_FILE');
  const privateFile = text('MERCHANT_PRIVATE_KEY_FILE')?.split(',')[0]?.trim();
  if (!publicFile && !privateFile) {
    problems.push('SANDBOX_MERCHANT_PUBLIC_KEY_FILE: required (or MERCHANT_PRIVATE_KEY_FILE to derive it from) (unset)');
  }

  const scaleText = text('SANDBOX_TIME_SCALE') ?? '1';
  const timeScale = Number(scaleText);
  if (!/^\d+(\.\d+)?$/.test(scaleText) || !(timeScale > 0) || timeScale > 1_000_000) {
    problems.push(`SANDBOX_TIME_SCALE: expected a number > 0 and ≤ 1000000 (got ${JSON.stringify(scaleText)})`);
  }

  const localText = (text('SANDBOX_ALLOW_LOCAL_CALLBACKS') ?? 'true').toLowerCase();
  if (!TRUE.includes(localText) && !FALSE.includes(localText)) {
    problems.push(`SANDBOX_ALLOW_LOCAL_CALLBACKS: expected true or false (got ${JSON.stringify(localText)})`);
  }

  const duration = (name: string, fallback: string, max: number): number => {
    const raw = text(name) ?? fallback;
    const ms = parseDuration(raw);
    if (ms === undefined || ms > max) {
      problems.push(`${name}: expected a duration such as 500ms or 10s, at most ${max} ms (got ${JSON.stringify(raw)})`);
      return 0;
    }
    return ms;
  };
  const firstAttemptDelayMs = duration('SANDBOX_FIRST_ATTEMPT_DELAY', '1s', 30_000);
  const replyTimeoutMs = duration('SANDBOX_REPLY_TIMEOUT', '10s', 600_000);

  if (problems.length > 0 || !merchantNo) {
    throw new AppError(ErrorCodes.CONFIG_INVALID, `invalid configuration:\n  - ${problems.join('\n  - ')}`, {
      details: { problems },
    });
  }
  return Object.freeze({
    merchantNo,
    publicKey: publicFile ? { file: publicFile, derive: false as const } : { file: privateFile!, derive: true as const },
    payinCallbackUrl: text('SANDBOX_PAYIN_CALLBACK_URL'),
    payoutCallbackUrl: text('SANDBOX_PAYOUT_CALLBACK_URL'),
    timeScale,
    allowLocalCallbacks: TRUE.includes(localText),
    firstAttemptDelayMs,
    replyTimeoutMs,
  });
}
