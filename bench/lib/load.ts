/**
 * HTTP/1.1 load generator over plain keep-alive sockets (no client library): requests are prepared buffers, a reply
 * is parsed only as far as its status and Content-Length. This keeps the generator's own CPU small, which matters
 * when it shares the machine's cores with the server it measures (its CPU time is reported alongside).
 *
 * - closed loop: C connections, each sends its next request when the previous reply arrives (finds peak rate);
 * - open loop: requests are due at a fixed rate whether or not earlier ones have finished; latency runs from the
 *   moment a request was due, so queueing delay counts (no coordinated omission).
 */
import { connect, type Socket } from 'node:net';

export interface LoadResult {
  /** 2xx replies. */
  ok: number;
  /** Non-2xx replies, by status. */
  statuses: Record<string, number>;
  errors: number;
  seconds: number;
  /** 2xx replies per second. */
  rps: number;
  /** Latency of every reply (ms). */
  latencies: Float64Array;
  /** CPU seconds the generator's process used during the run. */
  generatorCpuSeconds: number;
}

export interface Conn {
  socket: Socket;
  buf: Buffer;
  sentAt: number;
  busy: boolean;
  /** The server closed it (an idle keep-alive past INGEST_KEEPALIVE_TIMEOUT, a cut-off): never reused. */
  closed: boolean;
  onReply: ((status: number) => void) | undefined;
}

const HEADER_END = Buffer.from('\r\n\r\n');

export function openConn(host: string, port: number, onError: () => void): Promise<Conn> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, noDelay: true });
    const conn: Conn = { socket, buf: Buffer.alloc(0), sentAt: 0, busy: false, closed: false, onReply: undefined };
    socket.once('connect', () => resolve(conn));
    // A request in flight on a connection the server closes gets no reply: count it as failed (status 0).
    socket.once('close', () => {
      conn.closed = true;
      const cb = conn.onReply;
      conn.onReply = undefined;
      conn.busy = false;
      cb?.(0);
    });
    socket.once('error', (e) => {
      reject(e);
      if (conn.busy) onError();
    });
    socket.on('data', (chunk) => {
      conn.buf = conn.buf.length ? Buffer.concat([conn.buf, chunk]) : chunk;
      for (;;) {
        const end = conn.buf.indexOf(HEADER_END);
        if (end < 0) return;
        const head = conn.buf.subarray(0, end).toString('latin1');
        const status = Number(head.slice(9, 12));
        const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
        if (conn.buf.length < end + 4 + length) return;
        conn.buf = conn.buf.subarray(end + 4 + length);
        const cb = conn.onReply;
        conn.onReply = undefined;
        conn.busy = false;
        cb?.(status);
      }
    });
  });
}

export function send(conn: Conn, request: Buffer, onReply: (status: number) => void): void {
  if (conn.closed) {
    setImmediate(() => onReply(0));
    return;
  }
  conn.busy = true;
  conn.onReply = onReply;
  conn.socket.write(request);
}

function makeResult(
  ok: number,
  statuses: Record<string, number>,
  errors: number,
  ms: number,
  lat: number[],
  cpu0: NodeJS.CpuUsage,
): LoadResult {
  const cpu = process.cpuUsage(cpu0);
  return {
    ok,
    statuses,
    errors,
    seconds: ms / 1000,
    rps: ok / (ms / 1000),
    latencies: Float64Array.from(lat),
    generatorCpuSeconds: (cpu.user + cpu.system) / 1e6,
  };
}

/** Closed loop: `connections` clients back to back for `durationMs`. */
export async function closedLoop(opts: {
  host: string;
  port: number;
  connections: number;
  durationMs: number;
  next: () => Buffer;
}): Promise<LoadResult> {
  let errors = 0;
  const conns = await Promise.all(
    Array.from({ length: opts.connections }, () => openConn(opts.host, opts.port, () => errors++)),
  );
  const lat: number[] = [];
  const statuses: Record<string, number> = {};
  let ok = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const stopAt = t0 + opts.durationMs;
  await Promise.all(
    conns.map(
      (c) =>
        new Promise<void>((resolve) => {
          const loop = () => {
            const now = performance.now();
            if (now >= stopAt) return resolve();
            c.sentAt = now;
            send(c, opts.next(), (status) => {
              lat.push(performance.now() - c.sentAt);
              if (status >= 200 && status < 300) ok++;
              else statuses[status] = (statuses[status] ?? 0) + 1;
              loop();
            });
          };
          c.socket.once('close', () => resolve());
          loop();
        }),
    ),
  );
  const elapsed = performance.now() - t0;
  for (const c of conns) c.socket.destroy();
  return makeResult(ok, statuses, errors, elapsed, lat, cpu0);
}

/** Open loop: `rate` requests per second for `durationMs`, on up to `maxConnections` sockets. */
export async function openLoop(opts: {
  host: string;
  port: number;
  rate: number;
  durationMs: number;
  maxConnections: number;
  next: () => Buffer;
}): Promise<LoadResult> {
  let errors = 0;
  const idle: Conn[] = [];
  let open = 0;
  const waiting: number[] = []; // due times of requests with no free connection yet
  const lat: number[] = [];
  const statuses: Record<string, number> = {};
  let ok = 0;
  let inFlight = 0;
  let opening = 0;
  const all: Conn[] = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const total = Math.floor((opts.rate * opts.durationMs) / 1000);
  let issued = 0;
  let done!: () => void;
  const finished = new Promise<void>((r) => (done = r));

  const dispatch = (conn: Conn, dueAt: number) => {
    if (conn.closed) {
      // Closed by the server while idle: replace it; the request waits for the new connection.
      open--;
      waiting.unshift(dueAt);
      grow();
      return;
    }
    inFlight++;
    send(conn, opts.next(), (status) => {
      inFlight--;
      lat.push(performance.now() - dueAt);
      if (status >= 200 && status < 300) ok++;
      else statuses[status] = (statuses[status] ?? 0) + 1;
      const due = waiting.shift();
      if (due !== undefined) dispatch(conn, due);
      else idle.push(conn);
      if (issued >= total && inFlight === 0 && waiting.length === 0) done();
    });
  };
  const grow = () => {
    if (open + opening >= opts.maxConnections) return;
    opening++;
    openConn(opts.host, opts.port, () => errors++).then(
      (c) => {
        opening--;
        open++;
        all.push(c);
        const due = waiting.shift();
        if (due !== undefined) dispatch(c, due);
        else idle.push(c);
      },
      () => {
        opening--;
        errors++;
      },
    );
  };
  const tick = () => {
    const now = performance.now();
    const dueCount = Math.min(total, Math.floor(((now - t0) * opts.rate) / 1000));
    while (issued < dueCount) {
      const dueAt = t0 + (issued * 1000) / opts.rate;
      issued++;
      const c = idle.pop();
      if (c) {
        dispatch(c, dueAt);
      } else {
        waiting.push(dueAt);
        grow();
      }
    }
    if (issued >= total) {
      clearInterval(timer);
      if (inFlight === 0 && waiting.length === 0) done();
    }
  };
  const timer = setInterval(tick, 1);
  await finished;
  const elapsed = performance.now() - t0;
  for (const c of all) c.socket.destroy();
  return makeResult(ok, statuses, errors, elapsed, lat, cpu0);
}
