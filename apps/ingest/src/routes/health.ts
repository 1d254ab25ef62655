import type { FastifyInstance } from 'fastify';

/** Liveness and readiness. Readiness: Redis reachable, durable (or volatile explicitly allowed), not shutting down. */
export function registerHealthRoutes(
  app: FastifyInstance,
  readiness: () => Promise<{ ready: boolean; checks: Record<string, string> }>,
): void {
  app.get('/healthz', async (_request, reply) =>
    reply.code(200).header('cache-control', 'no-store').send({ status: 'ok' }),
  );
  app.get('/readyz', async (_request, reply) => {
    const { ready, checks } = await readiness();
    return reply
      .code(ready ? 200 : 503)
      .header('cache-control', 'no-store')
      .send({ status: ready ? 'ready' : 'not ready', checks });
  });
}
