import { loadConfig } from '@mcb/core/config';
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
});
