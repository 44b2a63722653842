/**
 * `node --import tsx bench/source-maps.ts`: what `--enable-source-maps` costs, on each Node of BENCH_NODES
 * (bench/nodes.ts). A child process on the compiled server (dist/server, as `npm start` runs it) throws the gateway's
 * own error (SvcError) from a few frames deep, N times: µs per error when nothing reads its stack (what a 4xx costs:
 * the error handler never formats it), and when the stack is read (a 5xx is logged with its stack), with and without
 * the flag; and the RSS after loading the server's modules with and without it.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchNodes } from './nodes.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const N = Number(process.env.BENCH_ERRORS ?? 20_000);

const child = `
const { invalid } = await import(${JSON.stringify(path.join(root, 'dist/server/errors/svc-error.js'))});
await import(${JSON.stringify(path.join(root, 'dist/server/api/app.js'))});
const deep = (n, read) => { if (n === 0) { try { throw invalid('x', 'y'); } catch (e) { return read ? e.stack.length : e.code.length; } } return deep(n - 1, read); };
const time = (read) => { for (let i = 0; i < 2000; i++) deep(8, read); const t = process.hrtime.bigint(); for (let i = 0; i < ${N}; i++) deep(8, read); return Number(process.hrtime.bigint() - t) / 1e3 / ${N}; };
const unread = time(false), read = time(true);
console.log(JSON.stringify({ unread_us: +unread.toFixed(2), read_us: +read.toFixed(2), rss_mb: Math.round(process.memoryUsage().rss / 2 ** 20), mapped: /svc-error\\.ts/.test(invalid('x', 'y').stack) }));
`;

const rows: string[] = [];
for (const node of benchNodes()) {
  for (const flags of [[], ['--enable-source-maps']]) {
    const out = JSON.parse(execFileSync(node.bin, [...flags, '--input-type=module', '-e', child], { cwd: root, env: { ...process.env, NODE_ENV: 'production' } }).toString()) as Record<string, number | boolean>;
    rows.push(`| ${node.version} | ${flags.join(' ') || '(none)'} | ${out.unread_us} | ${out.read_us} | ${out.rss_mb} | ${out.mapped ? 'TypeScript lines' : 'JavaScript lines'} |`);
  }
}
process.stdout.write(
  `SvcError thrown 8 frames deep, ${N} times after a warm-up:\n\n| Node | flags | µs per error, stack not read | µs per error, stack read | RSS MB with the server's modules loaded | stack names |\n|---|---|---|---|---|---|\n${rows.join('\n')}\n`,
);
