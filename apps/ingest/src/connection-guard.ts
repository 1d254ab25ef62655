/**
 * Connection admission and the body deadline of the public listener. Node's own bounds (headers, whole request,
 * idle) let one client hold a slot for seconds, and nothing stops one address from opening every slot. Here:
 *   - a connection from outside INGEST_ALLOWED_SOURCES, or beyond INGEST_MAX_CONNECTIONS_PER_ADDRESS from its
 *     source, is destroyed in the `connection` event, before the HTTP parser is attached and before a byte is read;
 *   - a request whose body is not complete INGEST_BODY_TIMEOUT after its headers is answered `408 fail` and closed.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { addressMatcher, ipv6Groups, type SourceRange } from '@mcb/core/config';
import type { IngestMetrics } from './metrics.ts';
import type { RefusalLog } from './refusal-log.ts';

/** Why a connection was refused or cut (the `reason` label of `ingest_connections_cut_total`). */
export type CutReason =
  | 'source_not_allowed'
  | 'address_limit'
  | 'max_connections'
  | 'body_timeout'
  | 'request_timeout'
  | 'idle'
  | 'client_error';

export interface ConnectionGuardOptions {
  /** Most open connections per source (IPv6: per /64); 0 = no limit. */
  maxPerAddress: number;
  /** Sources allowed to connect; undefined = any. */
  allowedSources: readonly SourceRange[] | undefined;
  /** Deadline of a request's body from the end of its headers, in ms. */
  bodyTimeoutMs: number;
  metrics: IngestMetrics;
  refusals: RefusalLog;
}

/**
 * The key connections are counted under: the IPv4 address (also when it arrives IPv4-mapped on a dual-stack
 * listener), or the /64 of an IPv6 address: one host usually holds a whole /64, so counting single IPv6 addresses
 * would give it 2^64 allowances.
 */
export function sourceKey(address: string | undefined): string {
  if (!address) return 'unknown';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  const groups = ipv6Groups(address);
  if (!groups) return address;
  return `${groups
    .slice(0, 4)
    .map((g) => g.toString(16))
    .join(':')}::/64`;
}

/** Write a complete `fail` reply with `status` if the socket can still take one, then destroy it. */
export function failAndClose(socket: Socket, status: string | undefined): void {
  if (status && socket.writable) {
    socket.write(
      `HTTP/1.1 ${status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 4\r\nConnection: close\r\n\r\nfail`,
    );
  }
  socket.destroy();
}

/** Install admission and the body deadline on `server` (the admitted connections are `ingest_connections_open`). */
export function guardConnections(server: Server, opts: ConnectionGuardOptions): void {
  const { metrics, refusals } = opts;
  const allowed = opts.allowedSources ? addressMatcher(opts.allowedSources) : undefined;
  const perSource = new Map<string, number>();

  const refuse = (socket: Socket, reason: CutReason, key: string) => {
    metrics.connectionsCut.inc({ reason });
    refusals.note(reason, key);
    socket.destroy();
  };

  // Node's HTTP server attaches its parser in its own `connection` listener, registered when the server is made.
  // Ours replaces it and calls it only for admitted sockets: a refused one never meets the parser, never is read.
  const httpListeners = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress;
    const key = sourceKey(address);
    if (allowed && !allowed(address)) return refuse(socket, 'source_not_allowed', key);
    const held = perSource.get(key) ?? 0;
    if (opts.maxPerAddress > 0 && held >= opts.maxPerAddress) return refuse(socket, 'address_limit', key);
    perSource.set(key, held + 1);
    metrics.connectionsAdmitted.inc();
    metrics.connectionsOpen.inc();
    socket.once('close', () => {
      metrics.connectionsOpen.dec();
      const left = (perSource.get(key) ?? 1) - 1;
      if (left > 0) perSource.set(key, left);
      else perSource.delete(key);
    });
    for (const listener of httpListeners) listener.call(server, socket);
  });

  // `request` is emitted once a request's headers are parsed; its body must be complete within the deadline. The
  // timer also covers a request answered early (404, 415) whose body is still trickling: Node would keep reading it.
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    if (req.complete) return;
    const cutIfIncomplete = () => {
      if (req.complete || req.socket.destroyed) return;
      metrics.connectionsCut.inc({ reason: 'body_timeout' });
      refusals.note('body_timeout', sourceKey(req.socket.remoteAddress));
      failAndClose(req.socket, res.headersSent ? undefined : '408 Request Timeout');
    };
    // Timers run before the event loop reads sockets: when the process lags (busy decrypting), a body that arrived
    // in time may still be unread in the kernel. setImmediate runs after the next read, so only a body that truly
    // has not arrived is cut.
    const timer = setTimeout(() => setImmediate(cutIfIncomplete), opts.bodyTimeoutMs);
    timer.unref();
    req.once('end', () => clearTimeout(timer));
  });
}
