import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * wrk (Debian's C load generator, `apt-get install -y wrk`): closed-loop load from a process that costs little CPU per
 * request, so more of the machine's cores go to what is measured than with a load generator in Node. One connection
 * (`connections: 1`) is the sequential method of the independent gateway benchmarks: a request, its answer, the next.
 */

export interface WrkTarget {
  url: string;
  method?: string;
  headers: Record<string, string>;
  body: string;
}

export interface WrkResult {
  requests: number;
  duration_s: number;
  requests_per_s: number;
  /** Socket errors (connect, read, write, timeout). */
  errors: number;
  /** Answers with a status outside 2xx and 3xx. */
  non_2xx: number;
  latency_ms: { p50: number; p99: number; p99_9: number; mean: number };
}

let available: boolean | null = null;
export function wrkAvailable(): boolean {
  if (available === null) {
    try {
      execFileSync('wrk', ['--version'], { stdio: 'ignore' });
      available = true;
    } catch (err) {
      // wrk --version exits 1 after printing its version.
      available = (err as { status?: number }).status === 1;
    }
  }
  return available;
}

const lua = (s: string) => `[==[${s}]==]`;

/** Runs wrk against `t` for `durationS` with `connections` (threads: one per core, at most one per connection). */
export function wrk(t: WrkTarget, opts: { connections: number; durationS: number; threads?: number }): Promise<WrkResult> {
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-wrk-'));
  const script = path.join(dir, 'req.lua');
  writeFileSync(
    script,
    `wrk.method = ${lua(t.method ?? 'POST')}
wrk.body = ${lua(t.body)}
${Object.entries(t.headers)
  .map(([k, v]) => `wrk.headers[ ${lua(k)} ] = ${lua(v)}`)
  .join('\n')}
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"errors":%d,"non_2xx":%d,"p50":%d,"p99":%d,"p999":%d,"mean":%.1f}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.mean))
end
`,
  );
  const threads = opts.threads ?? Math.max(1, Math.min(opts.connections, 2));
  return new Promise((resolve, reject) => {
    execFile(
      'wrk',
      ['-t', String(threads), '-c', String(opts.connections), '-d', `${opts.durationS}s`, '--timeout', '10s', '-s', script, t.url],
      { maxBuffer: 1 << 20 },
      (err, stdout, stderr) => {
        rmSync(dir, { recursive: true, force: true });
        const m = /WRKJSON (\{.*\})/.exec(stdout);
        if (!m) return reject(new Error(`wrk printed no summary: ${err?.message ?? ''} ${stderr} ${stdout}`.trim()));
        const j = JSON.parse(m[1]!) as Record<string, number>;
        const ms = (us: number) => Math.round(us / 10) / 100;
        const duration = j.duration_us! / 1e6;
        resolve({
          requests: j.requests!,
          duration_s: Math.round(duration * 100) / 100,
          requests_per_s: Math.round(j.requests! / duration),
          errors: j.errors!,
          non_2xx: j.non_2xx!,
          latency_ms: { p50: ms(j.p50!), p99: ms(j.p99!), p99_9: ms(j.p999!), mean: ms(j.mean!) },
        });
      },
    );
  });
}
