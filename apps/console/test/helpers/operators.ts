import { sha256Hex, type OperatorEntry } from '../../src/operators/directory.ts';

/** One operator of each role, with the tokens the tests send (the directory holds only their SHA-256). */
export const TOKENS = {
  viewer: 'viewer-token-0123456789abcdef',
  operator: 'operator-token-0123456789abcdef',
  admin: 'second-admin-token-0123456789ab',
  service: 'shop-service-token-0123456789ab',
} as const;

export const OPERATORS: OperatorEntry[] = [
  { name: 'vera.viewer@example.com', role: 'viewer', tokenSha256: sha256Hex(TOKENS.viewer) },
  { name: 'otto.operator@example.com', role: 'operator', tokenSha256: sha256Hex(TOKENS.operator) },
  { name: 'ada.admin@example.com', role: 'admin', tokenSha256: sha256Hex(TOKENS.admin) },
  // Signs in only through the SSO proxy: no token.
  { name: 'sso.only@example.com', role: 'operator' },
];

export const bearer = (role: keyof typeof TOKENS) => ({ authorization: `Bearer ${TOKENS[role]}` });

/** The shop's order system: a `service` client (not in {@link OPERATORS}: tests that want it add it). */
export const SERVICE: OperatorEntry = { name: 'shop-orders', role: 'service', tokenSha256: sha256Hex(TOKENS.service) };
