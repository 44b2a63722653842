import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';

/**
 * The bench's webhook receiver: an HTTPS server (certificate from a private CA the gateway trusts through
 * NODE_EXTRA_CA_CERTS, as a deployment would) that answers every delivery 200 at once and counts the distinct events.
 * GET /count answers {received, distinct}. Its own process, like the mock provider.
 */
const port = Number(process.env.PORT ?? 0);
const seen = new Set<string>();
let received = 0;
const server = createServer(
  { key: readFileSync(process.env.TLS_KEY_FILE!), cert: readFileSync(process.env.TLS_CERT_FILE!), keepAlive: true },
  (req, res) => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ received, distinct: seen.size }));
      return;
    }
    const event = req.headers['x-svc-delivery-id'];
    req.resume();
    req.on('end', () => {
      received++;
      if (typeof event === 'string') seen.add(event);
      res.writeHead(200).end();
    });
  },
);
server.keepAliveTimeout = 65_000;
server.listen(port, '127.0.0.1', () => {
  const addr = server.address();
  process.stdout.write(`LISTENING ${typeof addr === 'object' && addr ? addr.port : port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
