import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 in front of one service (PostgreSQL, Redis) that a test can cut off and
 * bring back, as a network or a server failure would, without touching the service others share.
 */
export interface TcpProxy {
  port: number;
  /** Connections pass (again). */
  restore(): void;
  /** Every open connection is reset now, and new ones are reset as they arrive, until `restore`. */
  cut(): void;
  /**
   * A network silently dropping packets: open connections stay open but carry nothing more, for
   * good; new ones are accepted and never reach the service, until `restore`.
   */
  stall(): void;
  /** Connections made through the proxy since it started. */
  connections(): number;
  /** Connections reset on arrival while it was cut. */
  refused(): number;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const pairs = new Set<[Socket, Socket]>();
  const silent = new Set<Socket>();
  let down = false;
  let stalled = false;
  /** Reads and drops whatever `socket` receives, sending nothing. */
  const silence = (socket: Socket) => {
    silent.add(socket);
    socket.on('error', () => silent.delete(socket)).on('close', () => silent.delete(socket));
    socket.resume();
  };
  let made = 0;
  let refused = 0;
  const server = createServer((client) => {
    if (down) {
      refused++;
      client.resetAndDestroy();
      return;
    }
    if (stalled) return silence(client);
    made++;
    const upstream = connect(target.port, target.host);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  const cut = () => {
    down = true;
    for (const [client, upstream] of pairs) {
      client.resetAndDestroy();
      upstream.destroy();
    }
    pairs.clear();
    for (const socket of silent) socket.destroy();
    silent.clear();
  };
  const stall = () => {
    stalled = true;
    for (const [client, upstream] of pairs) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      silence(client);
      silence(upstream);
    }
    pairs.clear();
  };
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    restore() {
      down = false;
      stalled = false;
    },
    cut,
    stall,
    connections: () => made,
    refused: () => refused,
    async close() {
      cut();
      server.close();
      await once(server, 'close');
    },
  };
}

/** `url` with its host and port replaced by the proxy's. */
export function throughProxy(url: string, proxy: TcpProxy): string {
  const proxied = new URL(url);
  proxied.hostname = '127.0.0.1';
  proxied.port = String(proxy.port);
  return proxied.toString();
}
