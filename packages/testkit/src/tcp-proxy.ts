import net from 'node:net';
import type { AddressInfo } from 'node:net';

/** A TCP proxy the test controls, to cut a process's connections to a shared server without touching the server. */
export interface TcpProxy {
  port: number;
  /** Stop accepting and destroy every open connection: the client sees the server vanish. */
  cut(): Promise<void>;
  /** Accept again on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Looks at the bytes of one proxied connection: `toServer`/`toClient` see each chunk before it is forwarded and
 * return false to swallow it; `drop` ends the connection as a network cut would.
 */
export interface TcpTap {
  toServer?(chunk: Buffer, drop: () => void): boolean;
  toClient?(chunk: Buffer, drop: () => void): boolean;
}

export async function startTcpProxy(targetHost: string, targetPort: number, tap: TcpTap = {}): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  let port = 0;

  const listen = async () => {
    const s = net.createServer((client) => {
      const upstream = net.connect({ host: targetHost, port: targetPort });
      sockets.add(client).add(upstream);
      const drop = () => {
        client.destroy();
        upstream.destroy();
        sockets.delete(client);
        sockets.delete(upstream);
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
      if (!tap.toServer && !tap.toClient) return void client.pipe(upstream).pipe(client);
      client.on('data', (chunk: Buffer) => (tap.toServer?.(chunk, drop) ?? true) && upstream.write(chunk));
      upstream.on('data', (chunk: Buffer) => (tap.toClient?.(chunk, drop) ?? true) && client.write(chunk));
    });
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => resolve());
    });
    port = (s.address() as AddressInfo).port;
    server = s;
  };
  const stop = async () => {
    const s = server;
    server = undefined;
    for (const socket of sockets) socket.destroy();
    sockets.clear();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };

  await listen();
  return {
    get port() {
      return port;
    },
    cut: stop,
    restore: listen,
    close: stop,
  };
}
