import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { Logger } from './logger.ts';

/** Prometheus text to serve: one registry, or a renderer (e.g. ingest's primary aggregating its cluster workers). */
export type MetricsSource = Registry | (() => Promise<{ contentType: string; body: string }>);

/** Options of {@link startMetricsServer}. */
export interface MetricsServerOptions {
  source: MetricsSource;
  port: number;
  /**
   * Listen address: loopback unless the caller says otherwise (an ops listener is never public).
   * @defaultValue '127.0.0.1'
   */
  host?: string;
  /** Told when rendering fails. */
  logger?: Logger;
  /**
   * `GET /readyz`: 200 when ready, else 503, with the checks as JSON (a worker or console whose Redis is unreachable).
   * @defaultValue no /readyz
   */
  readiness?: () => { ready: boolean; checks: Record<string, string> };
}

/** A listening ops server. */
export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

/**
 * An app's ops listener: `GET /metrics` (Prometheus text), `GET /healthz` and (given a readiness) `GET /readyz`, on
 * its own port and never on the public one, so nobody on the callback path can read our traffic and failure counts.
 */
export async function startMetricsServer(opts: MetricsServerOptions): Promise<MetricsServer> {
  const { source } = opts;
  const render =
    typeof source === 'function'
      ? source
      : async () => ({ contentType: source.contentType, body: await source.metrics() });
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && path === '/metrics') {
      render()
        .then(({ contentType, body }) => res.writeHead(200, { 'content-type': contentType }).end(body))
        .catch((e: unknown) => {
          opts.logger?.error({ err: e }, 'metrics render failed');
          res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics unavailable');
        });
      return;
    }
    if (req.method === 'GET' && path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      return;
    }
    if (req.method === 'GET' && path === '/readyz' && opts.readiness) {
      const { ready, checks } = opts.readiness();
      const body = JSON.stringify({ status: ready ? 'ready' : 'not ready', checks });
      res.writeHead(ready ? 200 : 503, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(body);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host ?? '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
