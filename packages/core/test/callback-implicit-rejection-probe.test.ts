import { describe, expect, it } from 'vitest';
import { assertImplicitRejection } from '@mcb/core/callback';
import { probeImplicitRejection } from '../src/callback/implicit-rejection.ts';

describe('implicit rejection probe', () => {
  it('passes on this runtime (Node 24 bundles OpenSSL >= 3.2)', () => {
    expect(probeImplicitRejection()).toBeUndefined();
    expect(() => assertImplicitRejection()).not.toThrow();
  });

  it('reports a runtime that throws on malformed padding, naming the runtime and the error', () => {
    const why = probeImplicitRejection(() => {
      throw new Error('RSA_PKCS1_PADDING is no longer supported for private decryption');
    });
    expect(why).toContain(`Node ${process.versions.node}`);
    expect(why).toContain('no longer supported');
  });

  it('reports a runtime whose output for a malformed block is not deterministic', () => {
    let n = 0;
    expect(probeImplicitRejection(() => Buffer.from([n++]))).toMatch(/non-deterministic/);
  });
});
