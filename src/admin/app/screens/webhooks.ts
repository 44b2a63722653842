import { useState } from 'preact/hooks';
import { gql } from '../api.ts';
import { EVENT_GROUPS, groupsFor } from '../catalog.ts';
import type { ScreenProps } from '../viewer.ts';
import { SidePanel } from '../panel.ts';
import { Card, Copy, ErrorBox, GroupedChecks, Pager, Status, fmtTime, html, usePager, useQuery } from '../ui.ts';

interface Attempt {
  attempt: number;
  attemptedAt: number;
  responseStatus: number | null;
  durationMs: number;
  error: string | null;
}
interface Delivery {
  id: string;
  eventId: string;
  eventType: string;
  status: string;
  attempts: number;
  lastAttemptAt: number | null;
  nextAttemptAt: number | null;
  responseStatus: number | null;
  createdAt: number;
  attemptLog: Attempt[];
}
interface Webhook {
  id: string;
  url: string;
  events: string[];
  status: string;
  createdAt: number;
}


const LIST = `query Webhooks($projectId: ID, $after: String) {
  webhooks(projectId: $projectId, first: 20, after: $after) { edges { node { id url events status createdAt } } pageInfo { hasNextPage endCursor } }
}`;
const DELIVERIES = `query Deliveries($id: ID!, $after: String) {
  webhook(id: $id) { id deliveries(first: 20, after: $after) {
    edges { node { id eventId eventType status attempts lastAttemptAt nextAttemptAt responseStatus createdAt
      attemptLog { attempt attemptedAt responseStatus durationMs error } } }
    pageInfo { hasNextPage endCursor } } }
}`;
const CREATE = `mutation CreateWebhook($input: CreateWebhookInput!) { createWebhook(input: $input) { secret webhook { id } } }`;
const DISABLE = `mutation DisableWebhook($id: ID!) { disableWebhook(id: $id) { id status } }`;
const SEND_TEST = `mutation SendWebhookTestEvent($webhookId: ID!) { sendWebhookTestEvent(webhookId: $webhookId) { id type } }`;
const REPLAY = `mutation ReplayDelivery($webhookId: ID!, $deliveryId: ID!) { replayDelivery(webhookId: $webhookId, deliveryId: $deliveryId) { id status } }`;

function Deliveries({ webhookId }: { webhookId: string }) {
  const pager = usePager();
  const [error, setError] = useState<unknown>(null);
  const q = useQuery(
    () => gql<{ webhook: { deliveries: { edges: { node: Delivery }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } } }>(DELIVERIES, { id: webhookId, after: pager.after }),
    [webhookId, pager.after],
  );
  const replay = async (deliveryId: string) => {
    try {
      await gql(REPLAY, { webhookId, deliveryId });
      setError(null);
      q.reload();
    } catch (err) {
      setError(err);
    }
  };
  return html`<${Card} title=${`Deliveries of ${webhookId}`}>
    <${ErrorBox} error=${q.error ?? error} />
    <table>
      <thead><tr><th>Delivery</th><th>Event</th><th>Status</th><th>Attempts</th><th>Last</th><th>Next</th><th></th></tr></thead>
      <tbody>${q.data?.webhook.deliveries.edges.map(({ node: d }) => html`<tr data-delivery-id=${d.id}>
        <td class="mono">${d.id}</td><td><code>${d.eventType}</code><div class="mono muted">${d.eventId}</div></td>
        <td><${Status} value=${d.status} /></td>
        <td><details><summary>${d.attempts} attempt${d.attempts === 1 ? '' : 's'}</summary>
          <ol>${d.attemptLog.map((a) => html`<li>${fmtTime(a.attemptedAt)}: ${a.responseStatus ?? 'no response'} in ${a.durationMs} ms${a.error ? html` — ${a.error}` : null}</li>`)}</ol>
        </details></td>
        <td>${fmtTime(d.lastAttemptAt)}</td><td>${fmtTime(d.nextAttemptAt)}</td>
        <td>${d.status === 'failed' ? html`<button type="button" onClick=${() => replay(d.id)}>Replay</button>` : null}</td>
      </tr>`)}</tbody>
    </table>
    <${Pager} pager=${pager} hasNext=${q.data?.webhook.deliveries.pageInfo.hasNextPage ?? false} endCursor=${q.data?.webhook.deliveries.pageInfo.endCursor ?? null} />
  <//>`;
}

export function WebhooksScreen({ projectId, catalog }: Pick<ScreenProps, 'projectId' | 'catalog'>) {
  const pager = usePager();
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<string[]>(['inference.completed']);
  const [error, setError] = useState<unknown>(null);
  const [secret, setSecret] = useState<string | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const [creating, setCreating] = useState(false);
  const q = useQuery(
    () => gql<{ webhooks: { edges: { node: Webhook }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } }>(LIST, { projectId, after: pager.after }),
    [projectId, pager.after],
  );
  const create = async (e: Event) => {
    e.preventDefault();
    try {
      const r = await gql<{ createWebhook: { secret: string } }>(CREATE, { input: { projectId, url, events } });
      setSecret(r.createWebhook.secret);
      setCreating(false);
      setUrl('');
      setError(null);
      q.reload();
    } catch (err) {
      setError(err);
    }
  };
  const [sent, setSent] = useState<{ webhookId: string; eventId: string } | null>(null);
  const [actionError, setActionError] = useState<unknown>(null);
  const sendTest = async (webhookId: string) => {
    try {
      const r = await gql<{ sendWebhookTestEvent: { id: string } }>(SEND_TEST, { webhookId });
      setSent({ webhookId, eventId: r.sendWebhookTestEvent.id });
      setActionError(null);
      // Shows the webhook's deliveries under the table, read again (the key changes) so the new one is listed first.
      setOpen(webhookId);
    } catch (err) {
      setSent(null);
      setActionError(err);
    }
  };
  const disable = async (id: string) => {
    try {
      await gql(DISABLE, { id });
      q.reload();
    } catch (err) {
      setError(err);
    }
  };
  return html`
    ${secret ? html`<div class="notice" role="status"><strong>Signing secret</strong> — shown once.
      <div class="secret"><code data-testid="webhook-secret">${secret}</code><${Copy} text=${secret} label="Copy secret" /></div>
      <p><button type="button" onClick=${() => setSecret(null)}>I have stored it</button></p></div>` : null}
    <section class="card" aria-label="Webhooks">
      <div class="card-head"><h2>Webhooks</h2><button type="button" class="primary" onClick=${() => setCreating(true)}>New webhook</button></div>
      <${ErrorBox} error=${q.error ?? actionError} />
      ${sent ? html`<p class="notice" role="status" data-testid="webhook-test-sent">Sent <code>webhook.test</code> <span class="mono">${sent.eventId}</span> to <span class="mono">${sent.webhookId}</span>: its delivery is listed below.</p>` : null}
      <table>
        <thead><tr><th>Webhook</th><th>URL</th><th>Events</th><th>Status</th><th>Created</th><th></th></tr></thead>
        <tbody>${q.data?.webhooks.edges.map(({ node: w }) => html`<tr data-webhook-id=${w.id}>
          <td class="mono">${w.id}</td><td class="mono">${w.url}</td><td>${w.events.join(', ')}</td><td><${Status} value=${w.status} /></td>
          <td>${fmtTime(w.createdAt)}</td>
          <td><div class="row-actions one-row"><button type="button" onClick=${() => setOpen(open === w.id ? null : w.id)} aria-expanded=${open === w.id}>Deliveries</button>
            ${w.status === 'active' ? html`<button type="button" onClick=${() => sendTest(w.id)}>Send test event</button>` : null}
            ${w.status === 'active' ? html`<button type="button" class="danger" onClick=${() => disable(w.id)}>Disable</button>` : null}</div></td>
        </tr>`)}</tbody>
      </table>
      ${q.data && q.data.webhooks.edges.length === 0 ? html`<p class="empty">No webhooks yet.</p>` : null}
      <${Pager} pager=${pager} hasNext=${q.data?.webhooks.pageInfo.hasNextPage ?? false} endCursor=${q.data?.webhooks.pageInfo.endCursor ?? null} />
    </section>
    <${SidePanel} title="Create a webhook" open=${creating} onClose=${() => setCreating(false)}>
      <form onSubmit=${create} aria-label="Create a webhook">
        <label>HTTPS URL <input name="url" type="url" required value=${url} placeholder="https://example.com/hooks/svc" onInput=${(e: Event) => setUrl((e.target as HTMLInputElement).value)} /></label>
        <${GroupedChecks} legend="Events" name="event" groups=${groupsFor(EVENT_GROUPS, catalog.events)} selected=${events}
          onToggle=${(t: string) => setEvents(events.includes(t) ? events.filter((x) => x !== t) : [...events, t])} />
        <p><button class="primary" type="submit">Create webhook</button></p>
        <${ErrorBox} error=${error} />
      </form>
    <//>
    ${open ? html`<${Deliveries} key=${`${open}:${sent?.eventId ?? ''}`} webhookId=${open} />` : null}`;
}
