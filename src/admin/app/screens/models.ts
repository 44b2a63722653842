import { useState } from 'preact/hooks';
import { gql } from '../api.ts';
import type { ScreenProps } from '../viewer.ts';
import { Card, ErrorBox, fmtTime, html, useQuery } from '../ui.ts';
import { chatCompletion, type ChatResult } from './playground-client.ts';

interface ConfiguredModel {
  id: string;
  type: string;
  inputPerMtok: number;
  outputPerMtok: number;
  cacheReadPerMtok: number | null;
  cacheWritePerMtok: number | null;
  batchDiscount: number | null;
}
interface Provider {
  name: string;
  kind: string;
  region: string;
  timeoutMs: number;
  circuit: string;
  models: ConfiguredModel[];
  recent: { requests: number; failed: number; errorRate: number; latencyP50Ms: number | null; latencyP95Ms: number | null; lastAt: number | null };
}

const PROVIDERS = `query Providers($projectId: ID) { providers(projectId: $projectId) {
  name kind region timeoutMs circuit
  models { id type inputPerMtok outputPerMtok cacheReadPerMtok cacheWritePerMtok batchDiscount }
  recent { requests failed errorRate latencyP50Ms latencyP95Ms lastAt }
} }`;

const price = (usd: number | null) => (usd === null ? '—' : `$${usd.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 4 })}`);
const pct = (x: number) => `${(x * 100).toLocaleString('en-US', { maximumFractionDigits: 1 })}%`;

/** What a circuit state means to the person reading the table. */
const CIRCUIT: Record<string, { label: string; status: string }> = {
  closed: { label: 'healthy', status: 'active' },
  half_open: { label: 'probing', status: 'pending' },
  open: { label: 'out (circuit open)', status: 'failed' },
};

type TestState = { running: true } | { running: false; result?: ChatResult; error?: unknown };

/** One test inference through the normal pipeline as the console's sign-in: recorded like any other. */
function TestButton({ provider, model, projectId }: { provider: string; model: string; projectId: string }) {
  const [state, setState] = useState<TestState | null>(null);
  const run = async () => {
    setState({ running: true });
    try {
      // The model's route is chosen as for any request (cheapest healthy provider first): the answer names the route.
      const result = await chatCompletion(
        { model, messages: [{ role: 'user', content: 'Reply with the single word: OK' }], max_tokens: 16 },
        { pastedKey: null, project: projectId },
      );
      setState({ running: false, result });
    } catch (error) {
      setState({ running: false, error });
    }
  };
  return html`<div class="model-test">
    <button type="button" onClick=${run} disabled=${state?.running === true} aria-label=${`Test ${model} on ${provider}`}>${state?.running ? 'Testing…' : 'Test'}</button>
    ${state && !state.running && state.result
      ? html`<div class="muted" role="status" data-testid="test-result">${state.result.ms} ms · <code>${String(state.result.extra.route ?? state.result.model ?? '')}</code> · “${state.result.content.slice(0, 80)}” · request <code>${state.result.requestId}</code></div>`
      : null}
    ${state && !state.running && state.error ? html`<${ErrorBox} error=${state.error} />` : null}
  </div>`;
}

/**
 * The providers file as the gateway runs it (kinds, regions, models and their prices) with each provider's health:
 * this replica's circuit breaker and the project's own last hour through it (requests, error rate, p50/p95 latency).
 */
export function ModelsScreen({ projectId, viewer }: ScreenProps) {
  const q = useQuery(() => gql<{ providers: Provider[] }>(PROVIDERS, { projectId }), [projectId]);
  const canTest = viewer.scopes.includes('inference:write');
  const providers = q.data?.providers ?? [];
  return html`
    <${Card} title="Providers">
      <p class="muted">From the providers file (<code>SVC_PROVIDERS_FILE</code>); base urls and keys stay on the server.
        Health is this replica's circuit breaker and this project's requests in the last hour.</p>
      <p><button type="button" onClick=${q.reload} disabled=${q.loading}>Refresh</button></p>
      <${ErrorBox} error=${q.error} />
      ${q.data && providers.length === 0 ? html`<p class="empty">No providers are configured.</p>` : null}
      ${providers.length > 0
        ? html`<table aria-label="Providers">
          <thead><tr><th>Provider</th><th>Kind</th><th>Region</th><th>Health</th><th>Requests (1 h)</th><th>Error rate</th><th>Latency p50 / p95</th><th>Last request</th></tr></thead>
          <tbody>${providers.map((p) => {
            const c = CIRCUIT[p.circuit] ?? { label: p.circuit, status: '' };
            return html`<tr data-provider=${p.name}>
              <td><strong>${p.name}</strong><div class="muted">timeout ${p.timeoutMs} ms</div></td><td><code>${p.kind}</code></td><td>${p.region}</td>
              <td><span class=${`status ${c.status}`} data-circuit=${p.circuit}>${c.label}</span></td>
              <td>${p.recent.requests.toLocaleString('en-US')}</td>
              <td>${p.recent.requests > 0 ? html`${pct(p.recent.errorRate)} <span class="muted">(${p.recent.failed} failed)</span>` : '—'}</td>
              <td>${p.recent.latencyP50Ms === null ? '—' : `${p.recent.latencyP50Ms} / ${p.recent.latencyP95Ms} ms`}</td>
              <td>${fmtTime(p.recent.lastAt)}</td>
            </tr>`;
          })}</tbody>
        </table>`
        : null}
    <//>
    <${Card} title="Models and prices">
      <p class="muted">USD per million tokens. A model served by several providers falls back between them, cheapest first (a test takes the same route a request would).${' '}
        ${canTest ? 'Test sends one short inference as this console session: it is limited, charged and recorded like any other.' : 'Testing needs inference:write.'}</p>
      ${providers.length > 0
        ? html`<table aria-label="Models">
          <thead><tr><th>Model</th><th>Provider</th><th>Type</th><th>Input</th><th>Output</th><th>Cache read / write</th><th>Batch discount</th><th></th></tr></thead>
          <tbody>${providers.flatMap((p) => p.models.map((m) => html`<tr data-model=${`${p.name}/${m.id}`}>
            <td><code>${m.id}</code></td><td>${p.name}</td><td>${m.type}</td>
            <td>${price(m.inputPerMtok)}</td><td>${price(m.outputPerMtok)}</td>
            <td>${m.cacheReadPerMtok === null && m.cacheWritePerMtok === null ? '—' : `${price(m.cacheReadPerMtok)} / ${price(m.cacheWritePerMtok)}`}</td>
            <td>${m.batchDiscount === null ? '—' : pct(m.batchDiscount)}</td>
            <td>${canTest && m.type === 'chat' ? html`<${TestButton} provider=${p.name} model=${m.id} projectId=${projectId} />` : null}</td>
          </tr>`))}</tbody>
        </table>`
        : null}
    <//>`;
}
