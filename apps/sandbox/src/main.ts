import { createPrivateKey, createPublicKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { loadConfig } from '@mcb/core/config';
import { AppError, coerceError, ErrorCodes } from '@mcb/core/errors';
import { createLogger } from '@mcb/core/logger';
import { buildApp } from './app.ts';
import { loadSandboxConfig } from './config.ts';

/** `pnpm start:sandbox`: wire the sandbox from the environment (docs/sandbox.md) and listen. */
function readPublicKey(source: { file: string; derive: boolean }): string {
  try {
    const text = readFileSync(source.file, 'utf8');
    // Deriving from the merchant's private key saves a second file in local setups; the key never leaves memory.
    return source.derive ? createPublicKey(createPrivateKey(text)).export({ type: 'spki', format: 'pem' }).toString() : text;
  } catch (e) {
    throw new AppError(ErrorCodes.KEY_FILE_INVALID, `cannot read the merchant's public key from ${source.file}: ${coerceError(e).message}`);
  }
}

try {
  const config = loadConfig(process.env, 'sandbox');
  const sandbox = loadSandboxConfig(process.env);
  const logger = createLogger({ name: 'sandbox', level: config.LOG_LEVEL });
  const app = await buildApp({
    merchantNo: sandbox.merchantNo,
    merchantPublicKeyPem: readPublicKey(sandbox.publicKey),
    timeScale: sandbox.timeScale,
    payinCallbackUrl: sandbox.payinCallbackUrl,
    payoutCallbackUrl: sandbox.payoutCallbackUrl,
    allowLocalCallbacks: sandbox.allowLocalCallbacks,
    firstAttemptDelayMs: sandbox.firstAttemptDelayMs,
    replyTimeoutMs: sandbox.replyTimeoutMs,
    logger,
  });
  await app.listen({ host: config.SANDBOX_HOST, port: config.SANDBOX_PORT });
  logger.info({ merchantNo: sandbox.merchantNo, timeScale: sandbox.timeScale }, 'sandbox listening');
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'sandbox stopping');
    await app.close();
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));
} catch (e) {
  console.error(`sandbox: ${coerceError(e).message}`);
  process.exitCode = 1;
}
