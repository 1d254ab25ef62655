import net from 'node:net';

/** Where the test run's Postgres and Redis are. */
export interface TestServices {
  /** A Postgres URL whose database part the harness replaces. */
  databaseUrl: string;
  redisUrl: string;
  /**
   * How they were found: from the environment, the local defaults, servers of our own started for this run
   * (own-services.ts; one of them may be the local default), or containers started for this run.
   */
  source: 'env' | 'local' | 'own' | 'testcontainers';
}

export const LOCAL_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/postgres';
export const LOCAL_REDIS_URL = 'redis://127.0.0.1:6379';

/** Whether a TCP connection to the URL's host and port opens within `timeoutMs`. */
export function canConnect(rawUrl: string, defaultPort: number, timeoutMs = 1000): Promise<boolean> {
  const u = new URL(rawUrl);
  const port = Number(u.port || defaultPort);
  const host = u.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1';
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export const HOW_TO_START = [
  'Tests need a real Postgres and a real Redis. Either:',
  '  - start them: `docker compose up -d postgres redis` (from the repository root), or',
  '  - point the tests at yours: DATABASE_URL=postgres://user@host:5432/db REDIS_URL=redis://host:6379 pnpm test, or',
  "  - unset DATABASE_URL and REDIS_URL: the harness then starts its own (the machine's redis-server and Postgres), or",
  '  - run a Docker engine so the harness can start containers itself (testcontainers).',
].join('\n');
