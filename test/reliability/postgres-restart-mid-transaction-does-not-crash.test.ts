import { createDb, type Db } from '@mcb/core/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOwnPostgres, type OwnPostgres } from './helpers/own-postgres.ts';

// Found by the chaos run: a worker died ("Unhandled 'error' event ... Connection terminated unexpectedly") when
// Postgres restarted while a drizzle transaction held a pool client. A checked-out client has no pool listener,
// so its 'error' event killed the process. createDb now gives every client a listener; the query fails instead.
describe('Postgres restart while a client is checked out', () => {
  let server: OwnPostgres;
  let db: Db;

  beforeAll(async () => {
    server = await startOwnPostgres();
    db = createDb(server.url('postgres'), { max: 2 });
  });
  afterAll(async () => {
    await db?.close();
    await server?.destroy();
  });

  it('fails the transaction with an error, does not crash the process, and the pool recovers', async () => {
    const client = await db.pool.connect();
    await client.query('begin');
    await server.restart(); // 'error' is emitted on the checked-out client here
    await expect(client.query('select 1')).rejects.toThrow();
    client.release();
    const { rows } = await db.pool.query<{ one: number }>('select 1 as one');
    expect(rows).toEqual([{ one: 1 }]);
  });
});
