import { useEffect, useState } from 'preact/hooks';
import { ApiError, gql } from '../api.ts';
import { Card, ErrorBox, fmtTime, html, useQuery } from '../ui.ts';

interface Limits {
  requestsPerMinute: number;
  tokensPerMinute: number;
  burst: number;
  updatedAt: number | null;
}

const GET = `query Limits($projectId: ID!) { rateLimits(projectId: $projectId) { requestsPerMinute tokensPerMinute burst updatedAt } }`;
const UPDATE = `mutation UpdateLimits($projectId: ID!, $input: RateLimitsInput!) {
  updateRateLimits(projectId: $projectId, input: $input) { requestsPerMinute tokensPerMinute burst updatedAt }
}`;

type FieldName = 'requestsPerMinute' | 'tokensPerMinute' | 'burst';

/** The API's bounds (domain/rate-limits/service.ts): the columns are PostgreSQL integers, as GraphQL's Int is. */
const MAX_LIMIT = 2_147_483_647;
const FIELDS: { name: FieldName; label: string; min: number; param: string }[] = [
  { name: 'requestsPerMinute', label: 'Requests per minute', min: 1, param: 'requests_per_minute' },
  { name: 'tokensPerMinute', label: 'Tokens per minute', min: 1, param: 'tokens_per_minute' },
  { name: 'burst', label: 'Burst (above requests per minute)', min: 0, param: 'burst' },
];

const fmtInt = (n: number) => n.toLocaleString('en-US');

/** The API's rules, shown inline before the request is sent; the gateway checks them again. */
function problem(value: string, min: number): string | null {
  const v = value.trim();
  if (v === '') return 'Required.';
  if (!/^-?\d+$/.test(v)) return `A whole number from ${min} to ${fmtInt(MAX_LIMIT)}.`;
  const n = Number(v);
  if (n < min) return `At least ${min}.`;
  if (n > MAX_LIMIT) return `At most ${fmtInt(MAX_LIMIT)}.`;
  return null;
}

/** The gateway's own message, except GraphQL's wording of an Int it could not read, said here in the form's terms. */
function refusal(error: ApiError, min: number): string {
  return error.message.startsWith('Variable "$')
    ? `The gateway refused this value: a whole number from ${min} to ${fmtInt(MAX_LIMIT)}.`
    : error.message;
}

export function LimitsScreen({ projectId }: { projectId: string }) {
  const q = useQuery(() => gql<{ rateLimits: Limits }>(GET, { projectId }), [projectId]);
  const [form, setForm] = useState<Record<FieldName, string>>({ requestsPerMinute: '', tokensPerMinute: '', burst: '' });
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);
  const [dirty, setDirty] = useState(false);
  useEffect(() => {
    // Loaded values fill the form only until the person starts typing: a late answer must not overwrite their edit.
    const l = q.data?.rateLimits;
    if (l && !dirty) setForm({ requestsPerMinute: String(l.requestsPerMinute), tokensPerMinute: String(l.tokensPerMinute), burst: String(l.burst) });
  }, [q.data]);
  const problems = Object.fromEntries(FIELDS.map((f) => [f.name, problem(form[f.name], f.min)])) as Record<FieldName, string | null>;
  const serverParam = error instanceof ApiError ? error.param : null;
  const submit = async (e: Event) => {
    e.preventDefault();
    if (Object.values(problems).some(Boolean)) return;
    try {
      await gql(UPDATE, {
        projectId,
        input: { requestsPerMinute: Number(form.requestsPerMinute), tokensPerMinute: Number(form.tokensPerMinute), burst: Number(form.burst) },
      });
      setError(null);
      setSaved(true);
      setDirty(false);
      q.reload();
    } catch (err) {
      setError(err);
      setSaved(false);
    }
  };
  return html`<${Card} title="Rate limits">
    <${ErrorBox} error=${q.error} />
    <p class="muted">These figures bind twice: once for the project's whole traffic and once for each of its keys on its
      own (every key gets the same figures; a key's windows cannot be set apart); the tighter window binds. Burst allows
      short spikes above requests per minute and does not raise the token window. An end customer can have windows of
      its own, set on the <a href="#/customers">Customers</a> screen; they bind beside these.
      Budgets are on the <a href="#/budgets">Budgets</a> screen. Last change: ${fmtTime(q.data?.rateLimits.updatedAt)}.</p>
    <form class="inline" onSubmit=${submit} aria-label="Edit rate limits" novalidate>
      ${FIELDS.map((f) => {
        const msg = problems[f.name] ?? (serverParam === f.param ? refusal(error as ApiError, f.min) : null);
        return html`<div class="field"><label for=${`limit-${f.name}`}>${f.label}</label>
          <input id=${`limit-${f.name}`} name=${f.name} inputmode="numeric" value=${form[f.name]} aria-invalid=${msg ? 'true' : 'false'} aria-describedby=${`${f.name}-error`}
            onInput=${(e: Event) => { setSaved(false); setDirty(true); setError(null); setForm({ ...form, [f.name]: (e.target as HTMLInputElement).value }); }} />
          <span class="field-error" id=${`${f.name}-error`} aria-live="polite">${msg ?? ''}</span></div>`;
      })}
      <button class="primary" type="submit" disabled=${Object.values(problems).some(Boolean)}>Save limits</button>
    </form>
    ${saved ? html`<div class="notice" role="status">Saved: new limits apply from the next request on every replica.</div>` : null}
    <${ErrorBox} error=${error}
      headline=${FIELDS.some((f) => f.param === serverParam) ? 'Not saved: the gateway refused a value (shown at its field).' : undefined} />
  <//>`;
}
