import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from '@mcb/core/metrics';

/** The console's ops listener: `GET /metrics` (Prometheus text) and `GET /healthz`; separate from the API port. */
export interface MetricsServer {
  server: Server;
  port: number;
  close(): Promise<void>;
}

export async function startMetricsServer(registry: Registry, port: number, host: string): Promise<MetricsServer> {
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/metrics') {
      registry
        .metrics()
        .then((text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text))
        .catch(() => res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics unavailable'));
      return;
    }
    if (req.method === 'GET' && req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
