/**
 * "Copy as" for the Playground: the request on screen as curl, the openai SDK (Node) and the Anthropic SDK (Node,
 * against /v1/messages). The key is always the $SVC_API_KEY placeholder, never a secret from the page. Plain functions
 * (no Preact), so tests import them alone.
 */
export interface PlaygroundRequest {
  baseUrl: string;
  model: string;
  system: string;
  messages: { role: 'user' | 'assistant'; content: string }[];
  stream: boolean;
  maxTokens: number | null;
  temperature: number | null;
  /** The gateway's own options (CONTRACT §10, §13), sent as extra body fields by the SDKs. */
  template: { id: string; version?: number; variables: Record<string, unknown> } | null;
  rag: { top_k: number } | null;
  /** A JSON Schema for structured output (CONTRACT §11); null: free text. */
  schema: Record<string, unknown> | null;
}

/** The /v1/chat/completions body the Playground sends. */
export function chatBody(r: PlaygroundRequest): Record<string, unknown> {
  const messages = [...(r.system.trim() ? [{ role: 'system', content: r.system }] : []), ...r.messages];
  return {
    model: r.model,
    messages,
    ...(r.stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    ...(r.maxTokens !== null ? { max_tokens: r.maxTokens } : {}),
    ...(r.temperature !== null ? { temperature: r.temperature } : {}),
    ...(r.template ? { template: r.template } : {}),
    ...(r.rag ? { rag: r.rag } : {}),
    ...(r.schema ? { response_format: { type: 'json_schema', json_schema: { name: 'answer', schema: r.schema, strict: true } } } : {}),
  };
}

/** Single quotes for a POSIX shell. */
const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

export function asCurl(r: PlaygroundRequest): string {
  const body = JSON.stringify(chatBody(r), null, 2);
  return [
    `curl ${r.stream ? '-N ' : ''}${r.baseUrl}/v1/chat/completions \\`,
    '  -H "Authorization: Bearer $SVC_API_KEY" \\',
    '  -H "Content-Type: application/json" \\',
    `  -d ${shellQuote(body)}`,
  ].join('\n');
}

/** A value as a JavaScript literal, indented by `indent` levels of two spaces; short plain objects on one line. */
function js(value: unknown, indent = 0): string {
  const pad = '  '.repeat(indent + 1);
  const end = '  '.repeat(indent);
  if (value === null || typeof value !== 'object') return JSON.stringify(value ?? null);
  if (Array.isArray(value)) {
    const short = `[${value.map((v) => JSON.stringify(v)).join(', ')}]`;
    if (value.every((v) => v === null || typeof v !== 'object') && short.length <= 60) return short;
    return value.length === 0 ? '[]' : `[\n${value.map((v) => `${pad}${js(v, indent + 1)}`).join(',\n')},\n${end}]`;
  }
  const entries = Object.entries(value as Record<string, unknown>);
  const key = (k: string) => (/^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k));
  const inline = `{ ${entries.map(([k, v]) => `${key(k)}: ${JSON.stringify(v ?? null)}`).join(', ')} }`;
  if (entries.every(([, v]) => v === null || typeof v !== 'object') && inline.length <= 88) return entries.length === 0 ? '{}' : inline;
  return `{\n${entries.map(([k, v]) => `${pad}${key(k)}: ${js(v, indent + 1)}`).join(',\n')},\n${end}}`;
}

/** The openai SDK for Node (ESM): the gateway's own options (template, rag) travel in the body as they are. */
export function asOpenAiSdk(r: PlaygroundRequest): string {
  const lines = [
    '// npm install openai',
    "import OpenAI from 'openai';",
    '',
    `const client = new OpenAI({ baseURL: ${JSON.stringify(`${r.baseUrl}/v1`)}, apiKey: process.env.SVC_API_KEY });`,
    '',
    `const ${r.stream ? 'stream' : 'completion'} = await client.chat.completions.create(${js(chatBody(r))});`,
  ];
  if (r.stream) lines.push("for await (const chunk of stream) process.stdout.write(chunk.choices[0]?.delta?.content ?? '');", "process.stdout.write('\\n');");
  else lines.push('console.log(completion.choices[0].message.content);');
  return lines.join('\n');
}

/** The Anthropic SDK for Node against /v1/messages, pointed at the gateway by ANTHROPIC_BASE_URL. */
export function asAnthropicSdk(r: PlaygroundRequest): string {
  const body = {
    model: r.model,
    max_tokens: r.maxTokens ?? 1024,
    ...(r.system.trim() ? { system: r.system } : {}),
    messages: r.messages,
    ...(r.temperature !== null ? { temperature: r.temperature } : {}),
  };
  // /v1/messages takes Anthropic's own fields only: the gateway's options ride on /v1/chat/completions.
  const left = [r.schema ? 'structured output' : null, r.template ? 'the template' : null, r.rag ? 'RAG' : null].filter(Boolean);
  const lines = [
    '// npm install @anthropic-ai/sdk',
    `// export ANTHROPIC_BASE_URL=${r.baseUrl} ANTHROPIC_API_KEY=$SVC_API_KEY`,
    ...(left.length > 0 ? [`// Left out: ${left.join(', ')} (options of /v1/chat/completions: use the openai SDK or curl for them).`] : []),
    "import Anthropic from '@anthropic-ai/sdk';",
    '',
    'const client = new Anthropic(); // reads ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY: calls go to /v1/messages',
    '',
  ];
  if (r.stream) {
    lines.push(
      `const stream = client.messages.stream(${js(body)});`,
      "stream.on('text', (text) => process.stdout.write(text));",
      'await stream.finalMessage();',
      "process.stdout.write('\\n');",
    );
  } else {
    lines.push(`const message = await client.messages.create(${js(body)});`, 'console.log(message.content[0].text);');
  }
  return lines.join('\n');
}
