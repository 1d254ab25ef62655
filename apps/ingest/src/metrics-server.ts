import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '@mcb/core/logger';

/** What the metrics listener serves: Prometheus text from one registry, or aggregated over cluster workers. */
export type RenderMetrics = () => Promise<{ contentType: string; body: string }>;

/** A started metrics listener. */
export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

/**
 * The ops listener: `GET /metrics` only, on its own port, never the public one (so the platform, or anyone on the
 * public path, cannot read our traffic and failure counts).
 */
export async function startMetricsServer(opts: { host: string; port: number; render: RenderMetrics; logger: Logger }): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    opts
      .render()
      .then(({ contentType, body }) => res.writeHead(200, { 'content-type': contentType }).end(body))
      .catch((e: unknown) => {
        opts.logger.error({ err: e }, 'metrics render failed');
        res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics unavailable');
      });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
