import { useRef, useState } from 'preact/hooks';
import { gql } from '../api.ts';
import type { ScreenProps } from '../viewer.ts';
import { Card, Copy, ErrorBox, fmtUsd, html, useQuery } from '../ui.ts';
import { chatCompletion, type ChatResult } from './playground-client.ts';
import { asAnthropicSdk, asCurl, asOpenAiSdk, chatBody, type PlaygroundRequest } from './playground-snippets.ts';

const MODELS = `query PlaygroundModels($projectId: ID) { providers(projectId: $projectId) { name models { id type } } }`;
const TEMPLATES = `query PlaygroundTemplates($projectId: ID) { templates(projectId: $projectId, first: 100) { edges { node { id name latestVersion } } } }`;

type Turn = { role: 'user' | 'assistant'; content: string };
type SnippetKind = 'curl' | 'openai' | 'anthropic';

const SNIPPETS: { kind: SnippetKind; label: string; make: (r: PlaygroundRequest) => string }[] = [
  { kind: 'curl', label: 'Copy as curl', make: asCurl },
  { kind: 'openai', label: 'Copy as openai SDK', make: asOpenAiSdk },
  { kind: 'anthropic', label: 'Copy as Anthropic SDK', make: asAnthropicSdk },
];

const value = (e: Event) => (e.target as HTMLInputElement).value;
const checked = (e: Event) => (e.target as HTMLInputElement).checked;

/**
 * Chat with a model over POST /v1/chat/completions, streamed, as the console's sign-in or as a pasted key (kept in
 * this component's memory only, never stored): an ordinary inference, limited, charged and recorded like any other.
 */
export function PlaygroundScreen({ viewer, projectId }: ScreenProps) {
  const models = useQuery(() => gql<{ providers: { name: string; models: { id: string; type: string }[] }[] }>(MODELS, { projectId }), [projectId]);
  const templates = useQuery(() => gql<{ templates: { edges: { node: { id: string; name: string; latestVersion: number } }[] } }>(TEMPLATES, { projectId }), [projectId]);
  const chatModels = [...new Set((models.data?.providers ?? []).flatMap((p) => p.models.filter((m) => m.type === 'chat').map((m) => m.id)))].sort();

  const [as, setAs] = useState<'session' | 'key'>('session');
  const [pasted, setPasted] = useState('');
  const [model, setModel] = useState('');
  const [system, setSystem] = useState('');
  const [stream, setStream] = useState(true);
  const [maxTokens, setMaxTokens] = useState('');
  const [temperature, setTemperature] = useState('');
  const [templateId, setTemplateId] = useState('');
  const [templateVars, setTemplateVars] = useState('{}');
  const [useRag, setUseRag] = useState(false);
  const [topK, setTopK] = useState('5');
  const [useSchema, setUseSchema] = useState(false);
  const [schema, setSchema] = useState('{\n  "type": "object",\n  "properties": { "answer": { "type": "string" } },\n  "required": ["answer"],\n  "additionalProperties": false\n}');
  const [turns, setTurns] = useState<Turn[]>([]);
  const [draft, setDraft] = useState('');
  const [partial, setPartial] = useState<string | null>(null);
  const [last, setLast] = useState<ChatResult | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [snippet, setSnippet] = useState<SnippetKind | null>(null);
  const abort = useRef<AbortController | null>(null);

  const chosenModel = model || chatModels[0] || 'mock-1';
  const request = (messages: Turn[]): PlaygroundRequest => {
    let variables: Record<string, unknown> = {};
    let parsedSchema: Record<string, unknown> | null = null;
    if (templateId) variables = JSON.parse(templateVars || '{}') as Record<string, unknown>;
    if (useSchema) parsedSchema = JSON.parse(schema) as Record<string, unknown>;
    return {
      baseUrl: location.origin,
      model: chosenModel,
      system,
      messages,
      stream,
      maxTokens: maxTokens.trim() ? Number(maxTokens) : null,
      temperature: temperature.trim() ? Number(temperature) : null,
      template: templateId ? { id: templateId, variables } : null,
      rag: useRag ? { top_k: Number(topK) || 5 } : null,
      schema: parsedSchema,
    };
  };
  // The snippet shows the conversation so far plus the message being typed.
  const snippetText = (() => {
    if (!snippet) return null;
    try {
      const messages = draft.trim() ? [...turns, { role: 'user' as const, content: draft }] : turns;
      return SNIPPETS.find((s) => s.kind === snippet)!.make(request(messages.length ? messages : [{ role: 'user', content: 'Hello' }]));
    } catch (err) {
      return `Cannot build the request: ${(err as Error).message}`;
    }
  })();

  const send = async (e: Event) => {
    e.preventDefault();
    if (!draft.trim() && !templateId) return;
    if (as === 'key' && !pasted.trim().startsWith('svc_sk_')) {
      setError(new Error('Paste a key (svc_sk_…) or choose the console session.'));
      return;
    }
    const messages: Turn[] = draft.trim() ? [...turns, { role: 'user', content: draft }] : turns;
    let req: PlaygroundRequest;
    try {
      req = request(messages);
    } catch (err) {
      setError(new Error(`Not valid JSON: ${(err as Error).message}`));
      return;
    }
    setTurns(messages);
    setDraft('');
    setError(null);
    setPartial('');
    abort.current = new AbortController();
    try {
      const result = await chatCompletion(chatBody(req), {
        pastedKey: as === 'key' ? pasted.trim() : null,
        project: projectId,
        onDelta: (text) => setPartial(text),
        signal: abort.current.signal,
      });
      setTurns([...messages, { role: 'assistant', content: result.content }]);
      setLast(result);
    } catch (err) {
      if ((err as Error).name !== 'AbortError') setError(err);
    } finally {
      setPartial(null);
      abort.current = null;
    }
  };

  const busy = partial !== null;
  return html`
    <${Card} title="Playground">
      <p class="muted">Each message is a real <code>POST /v1/chat/completions</code>: limited, charged and recorded in
        Requests like any other. ${viewer.kind === 'session' ? 'As the console session it runs as your operator role.' : 'As the console session it runs as the signed-in key.'}</p>
      <form class="inline" aria-label="Playground settings" onSubmit=${(e: Event) => e.preventDefault()}>
        <label>Run as <select name="as" value=${as} onChange=${(e: Event) => setAs(value(e) as 'session' | 'key')}>
          <option value="session">This console session</option><option value="key">A pasted key</option>
        </select></label>
        ${as === 'key'
          ? html`<label>Key (not stored) <input type="password" name="pasted-key" autocomplete="off" placeholder="svc_sk_…" value=${pasted} onInput=${(e: Event) => setPasted(value(e))} /></label>`
          : null}
        <label>Model <input name="model" list="playground-models" placeholder=${chatModels[0] ?? 'mock-1'} value=${model} onInput=${(e: Event) => setModel(value(e))} />
          <datalist id="playground-models">${chatModels.map((m) => html`<option value=${m}></option>`)}</datalist></label>
        <label>Max tokens <input name="max-tokens" inputmode="numeric" size="6" value=${maxTokens} onInput=${(e: Event) => setMaxTokens(value(e))} /></label>
        <label>Temperature <input name="temperature" inputmode="decimal" size="4" value=${temperature} onInput=${(e: Event) => setTemperature(value(e))} /></label>
        <label>Template <select name="template" value=${templateId} onChange=${(e: Event) => setTemplateId(value(e))}>
          <option value="">none</option>
          ${(templates.data?.templates.edges ?? []).map((t) => html`<option value=${t.node.id}>${t.node.name} (v${t.node.latestVersion})</option>`)}
        </select></label>
        ${templateId ? html`<label>Variables (JSON) <input name="template-variables" class="mono" value=${templateVars} onInput=${(e: Event) => setTemplateVars(value(e))} /></label>` : null}
        <div class="check"><input type="checkbox" id="pg-stream" checked=${stream} onChange=${(e: Event) => setStream(checked(e))} /><label for="pg-stream">Stream</label></div>
        <div class="check"><input type="checkbox" id="pg-rag" checked=${useRag} onChange=${(e: Event) => setUseRag(checked(e))} /><label for="pg-rag">RAG over the project's documents</label></div>
        ${useRag ? html`<label>Top k <input name="top-k" inputmode="numeric" size="3" value=${topK} onInput=${(e: Event) => setTopK(value(e))} /></label>` : null}
        <div class="check"><input type="checkbox" id="pg-schema" checked=${useSchema} onChange=${(e: Event) => setUseSchema(checked(e))} /><label for="pg-schema">Structured output (JSON Schema)</label></div>
      </form>
      ${useSchema ? html`<label>Response JSON Schema <textarea name="schema" class="mono" rows="6" value=${schema} onInput=${(e: Event) => setSchema(value(e))}></textarea></label>` : null}
      <label>System prompt <textarea name="system" rows="2" value=${system} onInput=${(e: Event) => setSystem(value(e))}></textarea></label>
    <//>
    <${Card} title="Conversation">
      <ol class="rendered" aria-label="Conversation" aria-live="polite">
        ${turns.map((t) => html`<li data-role=${t.role}><strong>${t.role}</strong><pre class="mono">${t.content}</pre></li>`)}
        ${busy ? html`<li data-role="assistant" data-streaming="true"><strong>assistant</strong><pre class="mono">${partial || '…'}</pre></li>` : null}
      </ol>
      ${turns.length === 0 && !busy ? html`<p class="empty">Write a message below to start.</p>` : null}
      <form onSubmit=${send} aria-label="Send a message">
        <label>Message <textarea name="message" rows="3" value=${draft} onInput=${(e: Event) => setDraft(value(e))}
          onKeyDown=${(e: KeyboardEvent) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) void send(e); }}></textarea></label>
        <p>
          <button class="primary" type="submit" disabled=${busy}>Send</button>${' '}
          ${busy ? html`<button type="button" onClick=${() => abort.current?.abort()}>Stop</button>` : null}${' '}
          <button type="button" disabled=${busy || turns.length === 0} onClick=${() => { setTurns([]); setLast(null); }}>Clear</button>${' '}
          <span class="muted">Ctrl+Enter sends.</span>
        </p>
      </form>
      <${ErrorBox} error=${error} />
      ${last
        ? html`<p class="muted" data-testid="playground-meta">${[
            html`request <code>${last.requestId ?? '—'}</code>`,
            html`id <code>${last.id ?? '—'}</code>`,
            last.extra.route ? html`route <code>${String(last.extra.route)}</code>` : null,
            last.usage ? `${last.usage.prompt_tokens} + ${last.usage.completion_tokens} tokens` : 'no usage reported',
            typeof last.extra.cost_usd === 'number' ? fmtUsd(last.extra.cost_usd) : null,
            `${last.ms} ms`,
            last.finishReason,
          ].filter(Boolean).map((part, i) => html`${i > 0 ? ' · ' : ''}${part}`)}</p>`
        : null}
    <//>
    <${Card} title="Copy as code">
      <p role="group" aria-label="Copy as">${SNIPPETS.map((s) => html`<button type="button" aria-pressed=${snippet === s.kind ? 'true' : 'false'} onClick=${() => setSnippet(snippet === s.kind ? null : s.kind)}>${s.label.replace('Copy as ', '')}</button> `)}</p>
      ${snippetText
        ? html`<pre class="mono snippet" data-testid="snippet" aria-label="Code">${snippetText}</pre>
          <${Copy} text=${snippetText} label=${SNIPPETS.find((s) => s.kind === snippet)!.label} />
          <p class="muted">The key is the <code>$SVC_API_KEY</code> placeholder: export your own key, never paste it into shared code.</p>`
        : html`<p class="muted">Shows the request above as curl, the openai SDK or the Anthropic SDK for Node (the latter on <code>/v1/messages</code> through <code>ANTHROPIC_BASE_URL</code>).</p>`}
    <//>`;
}
