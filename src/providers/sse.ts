/**
 * Server-sent events, as OpenAI-compatible servers send them: events separated by a blank line, `data:` lines joined
 * with "\n", comments (`:`) and other fields ignored. Yields each event's data.
 */
export async function* sseData(body: AsyncIterable<Uint8Array | string>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string[] = [];
  const line = function* (text: string) {
    if (text === '') {
      if (data.length > 0) {
        const out = data.join('\n');
        data = [];
        yield out;
      }
      return;
    }
    if (text.startsWith(':')) return;
    const colon = text.indexOf(':');
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
  };
  for await (const chunk of body) {
    buffer += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buffer.search(/\r\n|\r|\n/)) !== -1) {
      // A lone "\r" at the very end may be the first half of "\r\n": wait for the next chunk.
      if (nl === buffer.length - 1 && buffer[nl] === '\r') break;
      const text = buffer.slice(0, nl);
      buffer = buffer.slice(nl + (buffer[nl] === '\r' && buffer[nl + 1] === '\n' ? 2 : 1));
      yield* line(text);
    }
  }
  buffer += decoder.decode();
  if (buffer !== '') yield* line(buffer);
  yield* line('');
}
