/**
 * `npm run test:pgbouncer [-- vitest args]`: the test suite with every gateway's DATABASE_URL through a
 * transaction-pooling PgBouncer (Debian's 1.18, started here on a free port) and DATABASE_DIRECT_URL direct
 * (docs/TESTING.md). DATABASE_URL names the server (default postgresql://postgres@127.0.0.1:5432/postgres, trust).
 */
import { spawn } from 'node:child_process';
import { startPgBouncer } from '../test/helpers/pgbouncer.ts';

const databaseUrl = process.env.DATABASE_URL || 'postgresql://postgres@127.0.0.1:5432/postgres';
const server = new URL(databaseUrl);
const bouncer = await startPgBouncer({ target: { host: server.hostname, port: Number(server.port || 5432) } });
process.stderr.write(`PgBouncer (transaction pooling) on 127.0.0.1:${bouncer.port} in front of ${server.host}\n`);
const child = spawn('npx', ['vitest', 'run', ...process.argv.slice(2)], {
  stdio: 'inherit',
  env: { ...process.env, DATABASE_URL: databaseUrl, SVC_TEST_PGBOUNCER_URL: bouncer.url },
});
const stop = () => child.kill('SIGINT');
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
const code = await new Promise<number>((resolve) => child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
await bouncer.stop();
process.exit(code);
