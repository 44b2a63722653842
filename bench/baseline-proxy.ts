import Fastify from 'fastify';
import { Pool } from 'undici';

/**
 * The baseline: a bare fastify 5 proxy with one route that forwards the body to the mock provider through an undici
 * Pool, nothing else. The gateway's figures are reported as ratios against it, measured in the same run.
 */
const upstream = process.env.UPSTREAM!;
const port = Number(process.env.PORT ?? 0);
const pool = new Pool(new URL(upstream).origin, { connections: 128, pipelining: 1, keepAliveTimeout: 60_000 });
const path = `${new URL(upstream).pathname.replace(/\/$/, '')}/chat/completions`;

const app = Fastify({ logger: false });
app.post('/v1/inference', async (req, reply) => {
  const res = await pool.request({
    method: 'POST',
    path,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(req.body),
  });
  const text = await res.body.text();
  return reply.code(res.statusCode).type('application/json').send(text);
});
app.listen({ host: '127.0.0.1', port }).then(() => {
  const addr = app.server.address();
  process.stdout.write(`LISTENING ${typeof addr === 'object' && addr ? addr.port : port}\n`);
});
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
