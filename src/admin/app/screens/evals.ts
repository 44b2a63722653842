import { useEffect, useState } from 'preact/hooks';
import { gql } from '../api.ts';
import type { Viewer } from '../viewer.ts';
import { Card, ErrorBox, Status, fmtTime, fmtUsd, html, useQuery } from '../ui.ts';
import { parseCases } from '../eval-cases.ts';

interface Summary {
  total: number;
  passed: number;
  failed: number;
  errored: number;
  passRate: number;
  costUsd: number;
  latencyP50Ms: number | null;
}
interface EvalRun {
  id: string;
  name: string;
  model: string | null;
  status: string;
  concurrency: number;
  createdAt: number;
  completedAt: number | null;
  error: { code: string; message: string } | null;
  summary: Summary;
}
interface EvalResult {
  id: string;
  caseId: string;
  status: string;
  passed: boolean | null;
  output: string | null;
  reason: string | null;
  totalTokens: number;
  costUsd: number;
  latencyMs: number | null;
}

const RUN = 'id name model status concurrency createdAt completedAt error summary { total passed failed errored passRate costUsd latencyP50Ms }';
const LIST = `query Evals($projectId: ID) { evalRuns(projectId: $projectId, first: 50) { edges { node { ${RUN} } } } }`;
const RESULTS = `query EvalResults($id: ID!, $after: String) { evalRun(id: $id) { ${RUN}
  results(first: 100, after: $after) { edges { node { id caseId status passed output reason totalTokens costUsd latencyMs } } pageInfo { hasNextPage endCursor } } } }`;
const CREATE = `mutation CreateEval($projectId: ID, $name: String!, $model: String, $template: JSON, $cases: JSON!, $concurrency: Int) {
  createEvalRun(projectId: $projectId, name: $name, model: $model, template: $template, cases: $cases, concurrency: $concurrency) { ${RUN} } }`;
const CANCEL = `mutation CancelEval($id: ID!) { cancelEvalRun(id: $id) { ${RUN} } }`;

function Progress({ run }: { run: EvalRun }) {
  const s = run.summary;
  const done = s.passed + s.failed + s.errored;
  return html`<span class="progress" aria-label=${`Progress of ${run.name}`}>
    <progress max=${s.total} value=${done}></progress> ${done}/${s.total}${' '}
    · <span class="ok">${s.passed} passed</span> · ${s.failed} failed · ${s.errored} errored
  </span>`;
}

async function allResults(id: string): Promise<{ run: EvalRun; results: EvalResult[] }> {
  const results: EvalResult[] = [];
  let after: string | null = null;
  let run: EvalRun | null = null;
  for (;;) {
    const page: { evalRun: (EvalRun & { results: { edges: { node: EvalResult }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } }) | null } =
      await gql(RESULTS, { id, after });
    if (!page.evalRun) throw new Error(`No evaluation run ${id}.`);
    run = page.evalRun;
    results.push(...page.evalRun.results.edges.map((e) => e.node));
    if (!page.evalRun.results.pageInfo.hasNextPage || results.length >= 1000) return { run, results };
    after = page.evalRun.results.pageInfo.endCursor;
  }
}

function ResultsTable({ id, tick }: { id: string; tick: number }) {
  const q = useQuery(() => allResults(id), [id, tick]);
  if (!q.data) return html`<${ErrorBox} error=${q.error} />`;
  const { run, results } = q.data;
  return html`<div aria-label=${`Results of ${run.name}`}>
    <p><strong>${run.name}</strong> <${Status} value=${run.status} /> <${Progress} run=${run} />${' '}
      · pass rate ${(run.summary.passRate * 100).toFixed(1)}% · ${fmtUsd(run.summary.costUsd)} · p50 ${run.summary.latencyP50Ms ?? '—'} ms</p>
    ${run.error ? html`<div class="error" role="alert">${run.error.code}: ${run.error.message}</div>` : null}
    <table aria-label="Results">
      <thead><tr><th>Case</th><th>Status</th><th>Output</th><th>Reason</th><th>Tokens</th><th>Cost</th><th>Latency</th></tr></thead>
      <tbody>${results.map((r) => html`<tr data-case=${r.caseId} class=${r.passed === false ? 'changed' : ''}>
        <td><code>${r.caseId}</code></td><td><${Status} value=${r.status} /></td><td class="mono">${r.output ?? ''}</td>
        <td>${r.reason ?? ''}</td><td>${r.totalTokens}</td><td>${fmtUsd(r.costUsd)}</td><td>${r.latencyMs ?? '—'}</td></tr>`)}</tbody>
    </table>
  </div>`;
}

function Compare({ a, b }: { a: string; b: string }) {
  const q = useQuery(() => Promise.all([allResults(a), allResults(b)]), [a, b]);
  if (!q.data) return html`<${ErrorBox} error=${q.error} />`;
  const [left, right] = q.data;
  const byCase = new Map(right.results.map((r) => [r.caseId, r]));
  const cases = [...new Set([...left.results.map((r) => r.caseId), ...right.results.map((r) => r.caseId)])];
  const leftBy = new Map(left.results.map((r) => [r.caseId, r]));
  const cell = (r: EvalResult | undefined) => (r ? html`<${Status} value=${r.status} /> <span class="mono">${r.output ?? ''}</span>` : '—');
  return html`<table aria-label="Comparison">
    <thead><tr><th>Case</th><th>${left.run.name} (${(left.run.summary.passRate * 100).toFixed(1)}%)</th>
      <th>${right.run.name} (${(right.run.summary.passRate * 100).toFixed(1)}%)</th></tr></thead>
    <tbody>${cases.map((c) => {
      const l = leftBy.get(c);
      const r = byCase.get(c);
      return html`<tr data-case=${c} class=${l?.passed !== r?.passed ? 'changed' : ''}><td><code>${c}</code></td><td>${cell(l)}</td><td>${cell(r)}</td></tr>`;
    })}</tbody>
  </table>`;
}

/** Evaluation runs (CONTRACT §14): create one from pasted JSON or CSV, watch it, read its results, compare two. */
export function EvalsScreen({ viewer, projectId }: { viewer: Viewer; projectId: string }) {
  const [tick, setTick] = useState(0);
  const list = useQuery(() => gql<{ evalRuns: { edges: { node: EvalRun }[] } }>(LIST, { projectId }), [projectId, tick]);
  const runs = list.data?.evalRuns.edges.map((e) => e.node) ?? [];
  const active = runs.some((r) => r.status === 'queued' || r.status === 'running');
  // While a run is going, the list and its results refresh every 2 s.
  useEffect(() => {
    if (!active) return;
    const timer = setTimeout(() => setTick((t) => t + 1), 2_000);
    return () => clearTimeout(timer);
  }, [active, tick]);
  const [name, setName] = useState('');
  const [model, setModel] = useState('mock-1');
  const [templateId, setTemplateId] = useState('');
  const [concurrency, setConcurrency] = useState(4);
  const [text, setText] = useState('');
  const [error, setError] = useState<unknown>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const [compare, setCompare] = useState<string[]>([]);
  const canWrite = viewer.scopes.includes('evals:write');

  const create = async (e: Event) => {
    e.preventDefault();
    try {
      const template = templateId.trim() ? { id: templateId.trim() } : null;
      const cases = parseCases(text, { template: template !== null });
      const r = await gql<{ createEvalRun: EvalRun }>(CREATE, {
        projectId,
        name: name.trim() || 'evaluation',
        model: model.trim() || null,
        template,
        cases,
        concurrency,
      });
      setError(null);
      setText('');
      setSelected(r.createEvalRun.id);
      setTick(tick + 1);
    } catch (err) {
      setError(err);
    }
  };
  const cancel = async (id: string) => {
    try {
      await gql(CANCEL, { id });
      setTick(tick + 1);
    } catch (err) {
      setError(err);
    }
  };
  const toggleCompare = (id: string) =>
    setCompare(compare.includes(id) ? compare.filter((x) => x !== id) : [...compare, id].slice(-2));

  return html`
    ${canWrite
      ? html`<${Card} title="New evaluation run">
          <form onSubmit=${create} aria-label="New evaluation run">
            <label>Name <input name="name" maxlength="100" value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} /></label>
            <label>Model (with a template: blank uses the template's) <input name="model" value=${model} onInput=${(e: Event) => setModel((e.target as HTMLInputElement).value)} /></label>
            <label>Template (optional, tpl_…; the CSV's other columns are its variables)
              <input name="template" value=${templateId} onInput=${(e: Event) => setTemplateId((e.target as HTMLInputElement).value)} /></label>
            <label>Concurrency <input name="concurrency" type="number" min="1" max="16" value=${concurrency}
              onInput=${(e: Event) => setConcurrency(Number((e.target as HTMLInputElement).value))} /></label>
            <label>Cases: a JSON array as POST /v1/evals takes it, or CSV with a header (input, expected, assert, value, id)
              <textarea name="cases" rows="8" value=${text} onInput=${(e: Event) => setText((e.target as HTMLTextAreaElement).value)}
                placeholder=${'input,expected,assert\nWhat is 2+2?,4,contains'}></textarea></label>
            <button class="primary" type="submit">Run</button>
          </form>
          <${ErrorBox} error=${error} />
        <//>`
      : null}
    <${Card} title="Evaluation runs">
      <${ErrorBox} error=${list.error} />
      ${list.data && runs.length === 0 ? html`<p class="empty">No evaluation runs yet.</p>` : null}
      ${runs.length
        ? html`<table aria-label="Evaluation runs">
            <thead><tr><th>Compare</th><th>Run</th><th>Status</th><th>Progress</th><th>Pass rate</th><th>Cost</th><th>Created</th><th></th></tr></thead>
            <tbody>${runs.map((r) => html`<tr data-eval-id=${r.id}>
              <td><input type="checkbox" aria-label=${`Compare ${r.name}`} checked=${compare.includes(r.id)} onChange=${() => toggleCompare(r.id)} /></td>
              <td><a href="#/evals" onClick=${(e: Event) => (e.preventDefault(), setSelected(r.id))}>${r.name}</a> <span class="muted">${r.id} · ${r.model ?? ''}</span></td>
              <td><${Status} value=${r.status} /></td><td><${Progress} run=${r} /></td>
              <td>${(r.summary.passRate * 100).toFixed(1)}%</td><td>${fmtUsd(r.summary.costUsd)}</td><td>${fmtTime(r.createdAt)}</td>
              <td>${canWrite && (r.status === 'queued' || r.status === 'running')
                ? html`<button type="button" onClick=${() => cancel(r.id)}>Cancel</button>` : null}</td>
            </tr>`)}</tbody>
          </table>`
        : null}
    <//>
    ${compare.length === 2 ? html`<${Card} title="Comparison"><${Compare} a=${compare[0]} b=${compare[1]} /><//>` : null}
    ${selected ? html`<${Card} title="Results"><${ResultsTable} id=${selected} tick=${tick} /><//>` : null}`;
}
