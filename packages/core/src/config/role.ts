/** Every process that loads the config; index.ts says which variables each one requires. */
export const APP_ROLES = ['ingest', 'worker', 'console', 'sandbox', 'cli'] as const;

/** Which process is loading the config: decides which variables are required. */
export type AppRole = (typeof APP_ROLES)[number];
