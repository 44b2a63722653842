import { expect } from 'vitest';
import { parseProvidersDocument, type ProviderSpec } from '../../src/providers/config-file.ts';
import { ProviderError, type ChatOptions, type ProviderRequest, type StreamPart } from '../../src/providers/types.ts';

/** One provider entry through the real providers-file parser (so the tests also cover the schema's defaults). */
export function specOf(entry: Record<string, unknown>, env: Record<string, string> = {}): ProviderSpec {
  return parseProvidersDocument({ providers: [entry] }, env)[0]!;
}

export function request(messages: ProviderRequest['messages'], more: Partial<Omit<ProviderRequest, 'messages' | 'signal'>> = {}): ProviderRequest {
  return { model: 'm', messages, sampling: {}, signal: new AbortController().signal, ...more };
}

export const WEATHER_TOOL: NonNullable<ChatOptions['tools']>[number] = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

export const PERSON_FORMAT: ChatOptions['response_format'] = {
  type: 'json_schema',
  json_schema: { name: 'person', schema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }, strict: true },
};

/** A conversation with a tool round trip: the assistant called two tools, both answered. */
export const TOOL_ROUND_TRIP: ProviderRequest['messages'] = [
  { role: 'system', content: 'Be brief.' },
  { role: 'developer', content: 'Use tools.' },
  { role: 'user', content: 'Weather in Paris and Oslo?' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [
      { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
      { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } },
    ],
  },
  { role: 'tool', tool_call_id: 'call_1', content: '{"temp":21}' },
  { role: 'tool', tool_call_id: 'call_2', content: 'cold' },
];

export async function collect(stream: AsyncIterable<StreamPart>): Promise<StreamPart[]> {
  const out: StreamPart[] = [];
  for await (const p of stream) out.push(p);
  return out;
}

/** The text of the delta parts of choice 0. */
export const textOf = (parts: StreamPart[]) =>
  parts
    .filter((p): p is Extract<StreamPart, { type: 'delta' }> => p.type === 'delta' && !p.choice)
    .map((p) => p.content)
    .join('');

/** Tool-call parts put together as the gateway would: id, name and the joined arguments per index. */
export function toolCallsOf(parts: StreamPart[]): Array<{ index: number; id?: string; name?: string; arguments: string }> {
  const calls = new Map<number, { index: number; id?: string; name?: string; arguments: string }>();
  for (const p of parts) {
    if (p.type !== 'tool_call') continue;
    const c = calls.get(p.index) ?? { index: p.index, arguments: '' };
    if (p.id) c.id = p.id;
    if (p.name) c.name = p.name;
    c.arguments += p.arguments;
    calls.set(p.index, c);
  }
  return [...calls.values()];
}

export async function providerError(p: Promise<unknown>): Promise<ProviderError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProviderError);
  return err as ProviderError;
}
