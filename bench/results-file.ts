import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * bench/results.json and its rendering bench/results.md hold every benchmark's current figures, one pair of files:
 * `npm run bench` writes the file whole and keeps the members the other benchmarks own, `rag` (bench/rag.ts) and
 * `soak` (`npm run soak`), which each of them replaces when it runs.
 */
export const RESULTS_JSON = path.join(root, 'bench', 'results.json');
const OWN_MEMBERS = ['rag', 'soak'] as const;
type Member = (typeof OWN_MEMBERS)[number];

/** The other benchmarks' members of a results file, to carry into the file written again. */
export function keptMembers(file: string): Partial<Record<Member, unknown>> {
  if (!existsSync(file)) return {};
  const old = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  return Object.fromEntries(OWN_MEMBERS.filter((m) => old[m] !== undefined).map((m) => [m, old[m]]));
}

/** Replaces one benchmark's member of bench/results.json, then renders bench/results.md again (bench/run.ts). */
export function writeMember(member: Member, value: unknown): void {
  const current = existsSync(RESULTS_JSON) ? (JSON.parse(readFileSync(RESULTS_JSON, 'utf8')) as Record<string, unknown>) : {};
  current[member] = value;
  writeFileSync(RESULTS_JSON, `${JSON.stringify(current, null, 2)}\n`);
  if (current.runs || current.results) {
    execFileSync(process.execPath, ['--import', 'tsx', path.join(root, 'bench', 'run.ts')], {
      cwd: root,
      env: { ...process.env, BENCH_RENDER: RESULTS_JSON },
      stdio: 'inherit',
    });
  }
}

/** The sections of results.md that the other benchmarks' members render to (empty when there are none). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function renderOtherBenchmarks(r: any): string {
  let out = '';
  if (r.rag) {
    const rag = r.rag;
    out += `\n## RAG retrieval (bench/rag.ts, ${rag.date})\n\n${rag.machine}; ${rag.queries_per_mode} queries per mode, top_k ${rag.top_k}, ${rag.embedding}.\n\n`;
    out += '| backend | chunks | indexing chunks/s | keyword p50 / p99 ms | vector p50 / p99 ms | hybrid p50 / p99 ms |\n|---|---|---|---|---|---|\n';
    for (const x of rag.rows) {
      out += `| ${x.backend} | ${x.chunks} | ${x.indexing_chunks_per_s} | ${x.keyword_p50_ms} / ${x.keyword_p99_ms} | ${x.vector_p50_ms} / ${x.vector_p99_ms} | ${x.hybrid_p50_ms} / ${x.hybrid_p99_ms} |\n`;
    }
  }
  if (r.soak) {
    const s = r.soak;
    const l = s.load;
    out += `\n## Soak (npm run soak, ${s.date})\n\n`;
    out += `${s.settings.seconds} s at ${s.settings.rate_per_s} req/s over ${s.settings.connections} connections (${s.settings.mix}), Node ${s.machine.node}, limit ${s.settings.rss_limit_mb} MB: `;
    out += `${l.requests} requests (${l.requests_per_s}/s, p50 ${l.latency_ms.p50} ms, p99 ${l.latency_ms.p99} ms, non-2xx ${l.non_2xx}, errors ${l.errors}); `;
    out += `RSS idle ${s.rss.idle_after_start_mb} MB after start, under load min ${s.rss.min_mb} / peak ${s.rss.peak_mb} MB, first ${s.rss.window_s} s avg ${s.rss.first_window_avg_mb} MB, last ${s.rss.window_s} s avg ${s.rss.last_window_avg_mb} MB, slope ${s.rss.slope_mb_per_min} MB/min: **${s.verdict.pass ? 'PASS' : 'FAIL'}**.\n`;
  }
  return out;
}
