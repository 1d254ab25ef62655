import { describe, expect, it } from 'vitest';
import { loadSandboxConfig } from '../src/config.ts';

describe('loadSandboxConfig', () => {
  it('applies the defaults and falls back to the pipeline merchant settings', () => {
    const c = loadSandboxConfig({ MERCHANT_NO: 'M1', MERCHANT_PRIVATE_KEY_FILE: '/k/current.pem,/k/old.pem' });
    expect(c).toEqual({
      merchantNo: 'M1',
      publicKey: { file: '/k/current.pem', derive: true },
      payinCallbackUrl: undefined,
      payoutCallbackUrl: undefined,
      timeScale: 1,
      allowLocalCallbacks: true,
      firstAttemptDelayMs: 1000,
      replyTimeoutMs: 10_000,
    });
  });

  it('reads every SANDBOX_* variable', () => {
    const c = loadSandboxConfig({
      SANDBOX_MERCHANT_NO: 'S1',
      MERCHANT_NO: 'ignored',
      SANDBOX_MERCHANT_PUBLIC_KEY_FILE: '/k/pub.pem',
      SANDBOX_PAYIN_CALLBACK_URL: 'https://m.example/in',
      SANDBOX_PAYOUT_CALLBACK_URL: 'https://m.example/out',
      SANDBOX_TIME_SCALE: '600',
      SANDBOX_ALLOW_LOCAL_CALLBACKS: 'false',
      SANDBOX_FIRST_ATTEMPT_DELAY: '5s',
      SANDBOX_REPLY_TIMEOUT: '500ms',
    });
    expect(c).toMatchObject({
      merchantNo: 'S1',
      publicKey: { file: '/k/pub.pem', derive: false },
      payinCallbackUrl: 'https://m.example/in',
      timeScale: 600,
      allowLocalCallbacks: false,
      firstAttemptDelayMs: 5000,
      replyTimeoutMs: 500,
    });
  });

  it('names every bad or missing variable in one error', () => {
    let message = '';
    try {
      loadSandboxConfig({
        SANDBOX_TIME_SCALE: '0',
        SANDBOX_ALLOW_LOCAL_CALLBACKS: 'maybe',
        SANDBOX_FIRST_ATTEMPT_DELAY: '31s',
      });
    } catch (e) {
      message = (e as Error).message;
    }
    for (const name of [
      'SANDBOX_MERCHANT_NO',
      'SANDBOX_MERCHANT_PUBLIC_KEY_FILE',
      'SANDBOX_TIME_SCALE',
      'SANDBOX_ALLOW_LOCAL_CALLBACKS',
      'SANDBOX_FIRST_ATTEMPT_DELAY',
    ]) {
      expect(message).toContain(name);
    }
  });
});
