import { loadConfig, type Merchant } from '@mcb/core/config';
import { createPlatformClientFromConfig } from '@mcb/core/platform';
import { describe, expect, it } from 'vitest';

describe('createPlatformClientFromConfig', () => {
  it('names every missing setting instead of calling an undefined platform', () => {
    expect(() => createPlatformClientFromConfig(loadConfig({}, 'cli'))).toThrowError(
      expect.objectContaining({
        code: 'CONFIG_INVALID',
        message: expect.stringMatching(
          /MERCHANT_NO: required to reach the platform[\s\S]*PLATFORM_BASE_URL: required to reach the platform/,
        ),
      }),
    );
  });

  it('builds a client from the environment', async () => {
    const client = createPlatformClientFromConfig(
      loadConfig({ MERCHANT_NO: 'M1', PLATFORM_BASE_URL: 'http://127.0.0.1:1', PLATFORM_ALLOW_HTTP: 'true' }, 'cli'),
    );
    await expect(client.getOrder('X', {})).rejects.toMatchObject({ code: 'PLATFORM_UNREACHABLE' });
    await client.close();
  });

  it("asks with the merchant's own number and base URL, and names what a merchant without them lacks", async () => {
    const config = loadConfig(
      { MERCHANT_NO: 'M1', PLATFORM_BASE_URL: 'http://127.0.0.1:1', PLATFORM_ALLOW_HTTP: 'true' },
      'cli',
    );
    const own: Merchant = {
      ...config.merchants[0]!,
      ref: 'b',
      merchantNo: 'M-B',
      platformBaseUrl: 'http://127.0.0.1:2',
    };
    const client = createPlatformClientFromConfig(config, { merchant: own });
    // Port 2, not PLATFORM_BASE_URL's port 1: the merchant's own platform.
    await expect(client.getOrder('X', {})).rejects.toMatchObject({
      code: 'PLATFORM_UNREACHABLE',
      message: expect.stringContaining('127.0.0.1:2'),
    });
    await client.close();
    const bare = { ...config, PLATFORM_BASE_URL: undefined };
    expect(() =>
      createPlatformClientFromConfig(bare, { merchant: { ...own, platformBaseUrl: undefined, merchantNo: '' } }),
    ).toThrowError(
      expect.objectContaining({
        message: expect.stringMatching(/MERCHANT_NO: required to reach the platform[\s\S]*PLATFORM_BASE_URL: required/),
      }),
    );
  });
});
