import type { ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { InFlight } from '../kernel/in-flight.ts';

/**
 * What the drain allows beyond SVC_ROUTING_TIMEOUT_MS (which bounds an inference's provider hops): the request's own
 * reads and writes and sending the answer. README "Configuration" (the drain) states the bound.
 */
export const DRAIN_MARGIN_MS = 5_000;

export interface DrainOptions {
  /** From the start of the drain: connections still open then are cut. */
  deadlineMs: number;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
}

export interface Drain {
  /**
   * Stops accepting, finishes the requests in flight and closes every connection; resolves once all are closed, at
   * the latest at the deadline (plus a second for the cut sockets to go).
   */
  close(): Promise<void>;
}

/**
 * A bounded, graceful close for a fastify app; call it before the app listens (it watches every request).
 *
 * fastify's close stops accepting and closes the keep-alive connections idle at that moment, then waits for the
 * others. A connection busy at that moment stays open after its answer (keep-alive, 72 s, and a client such as undici
 * keeps it as long as the server said it may), so the close never ended. Here, from the start of the drain:
 * - an answer not yet sent carries `Connection: close`, and Node ends its connection once it is sent;
 * - a connection that turns idle (an answer whose headers had already gone out with keep-alive: a stream) is closed;
 * - requests arriving on an open connection get fastify's 503 with `Connection: close` (return503OnClosing);
 * - at the deadline every connection still open (a stuck upload, half a request) is cut: Node stops enforcing its
 *   header and request timeouts once the server is closed, so nothing else would end them.
 */
export function drainOnClose(app: FastifyInstance, opts: DrainOptions): Drain {
  const server = app.server;
  // The responses not sent yet: a list, not a Set (a Set churned by every request costs the GC dearly: kernel/in-flight.ts).
  const unanswered = new InFlight<ServerResponse>();
  let draining = false;
  const closeIdle = () => server.closeIdleConnections();
  const closeAfter = (res: ServerResponse) => {
    if (!res.headersSent) res.setHeader('Connection', 'close');
  };
  server.on('request', (_req, res: ServerResponse) => {
    if (res.writableEnded) return;
    const entry = unanswered.add(res);
    if (draining) closeAfter(res);
    res.once('close', () => {
      unanswered.delete(entry);
      // The next turn: Node has then marked the connection idle (or ended it, with Connection: close).
      if (draining) setImmediate(closeIdle);
    });
  });

  let closing: Promise<void> | null = null;
  return {
    close() {
      closing ??= (async () => {
        draining = true;
        const started = performance.now();
        for (const res of unanswered.values()) closeAfter(res);
        let timer: NodeJS.Timeout | undefined;
        let cut = false;
        const deadline = new Promise<void>((resolve) => {
          timer = setTimeout(() => {
            cut = true;
            opts.log.warn({ unanswered: unanswered.size, deadline_ms: opts.deadlineMs }, 'drain deadline: closing the connections still open');
            server.closeAllConnections();
            // The sockets are destroyed now; their close events (and so fastify's) follow within a turn or two.
            setTimeout(resolve, 1_000);
          }, opts.deadlineMs);
        });
        try {
          await Promise.race([app.close(), deadline]);
        } finally {
          clearTimeout(timer);
        }
        if (!cut) opts.log.info({ ms: Math.round(performance.now() - started) }, 'requests drained');
      })();
      return closing;
    },
  };
}
