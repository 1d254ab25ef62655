import { createPrivateKey, createPublicKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { loadConfig } from '@mcb/core/config';
import { AppError, coerceError, ErrorCodes } from '@mcb/core/errors';
import { createReleasers } from '@mcb/core/lifecycle';
import { createLogger, logFormatOf } from '@mcb/core/logger';
import { buildApp } from './app.ts';
import { sandboxSettings } from './config.ts';

/** `pnpm start:sandbox`: wire the sandbox from the environment (docs/sandbox.md) and listen. */
function readPublicKey(source: { file: string; derive: boolean }): string {
  try {
    const text = readFileSync(source.file, 'utf8');
    // Deriving from the merchant's private key saves a second file in local setups; the key never leaves memory.
    return source.derive
      ? createPublicKey(createPrivateKey(text)).export({ type: 'spki', format: 'pem' }).toString()
      : text;
  } catch (e) {
    throw new AppError(
      ErrorCodes.KEY_FILE_INVALID,
      `cannot read the merchant's public key from ${source.file}: ${coerceError(e).message}`,
    );
  }
}

const logger = createLogger({ name: 'sandbox', format: logFormatOf(process.env) });
const releasers = createReleasers(logger, { stoppingMessage: 'sandbox stopping' });

try {
  const config = loadConfig(process.env, 'sandbox');
  logger.level = config.LOG_LEVEL;
  const sandbox = sandboxSettings(config);
  const app = await buildApp({
    // Every merchant of MERCHANTS_FILE, or the one merchant of today's variables.
    ...(sandbox.merchants
      ? {
          merchants: sandbox.merchants.map((m) => ({
            ref: m.ref,
            merchantNo: m.merchantNo,
            merchantPublicKeyPem: readPublicKey(m.publicKey),
          })),
        }
      : { merchantNo: sandbox.merchantNo, merchantPublicKeyPem: readPublicKey(sandbox.publicKey) }),
    timeScale: sandbox.timeScale,
    payinCallbackUrl: sandbox.payinCallbackUrl,
    payoutCallbackUrl: sandbox.payoutCallbackUrl,
    allowLocalCallbacks: sandbox.allowLocalCallbacks,
    firstAttemptDelayMs: sandbox.firstAttemptDelayMs,
    replyTimeoutMs: sandbox.replyTimeoutMs,
    logger,
  });
  releasers.add('http server', () => app.close());
  await app.listen({ host: config.SANDBOX_HOST, port: config.SANDBOX_PORT });
  releasers.onSignals();
  logger.info(
    {
      merchants: (sandbox.merchants ?? [{ ref: 'default', merchantNo: sandbox.merchantNo }]).map(
        (m) => `${m.ref} (${m.merchantNo})`,
      ),
      timeScale: sandbox.timeScale,
    },
    'sandbox listening',
  );
} catch (e) {
  console.error(`sandbox: ${coerceError(e).message}`);
  await releasers.shutdown('startup-failure', 1);
}
