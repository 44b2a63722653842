/** The Evals screen's paste box: cases from JSON or CSV (no DOM, so it is tested in node: test/evals). */

/** One CSV line's fields (RFC 4180 quotes: "a, b" and "" for a quote). */
function csvFields(line: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (quoted) {
      if (ch === '"' && line[i + 1] === '"') (cur += '"'), i++;
      else if (ch === '"') quoted = false;
      else cur += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') out.push(cur), (cur = '');
    else cur += ch;
  }
  out.push(cur);
  return out;
}

/**
 * The cases from what was pasted: a JSON array of cases as POST /v1/evals takes them, or CSV with a header of
 * `input` (the user message) and optionally `id`, `expected`, `assert` (exact, contains, regex; default contains) and
 * `value`. For a template run (`template: true`), every other column is a template variable and `input` is optional.
 */
export function parseCases(text: string, opts: { template?: boolean } = {}): unknown[] {
  const trimmed = text.trim();
  if (trimmed.startsWith('[')) {
    const parsed = JSON.parse(trimmed) as unknown;
    if (!Array.isArray(parsed)) throw new Error('The JSON must be an array of cases.');
    return parsed;
  }
  const lines = trimmed.split(/\r?\n/).filter((l) => l.trim() !== '');
  if (lines.length < 2) throw new Error('Paste a JSON array of cases, or CSV with a header line (input, expected, assert, value, id) and one case per line.');
  const header = csvFields(lines[0]!).map((h) => h.trim().toLowerCase());
  const col = (row: string[], name: string) => {
    const i = header.indexOf(name);
    return i >= 0 && row[i] !== undefined && row[i] !== '' ? row[i] : undefined;
  };
  if (!opts.template && !header.includes('input')) throw new Error('The CSV header needs an "input" column.');
  const known = new Set(['id', 'input', 'expected', 'assert', 'value']);
  return lines.slice(1).map((line) => {
    const row = csvFields(line);
    const expected = col(row, 'expected');
    const value = col(row, 'value');
    const id = col(row, 'id');
    const input = col(row, 'input');
    const variables = Object.fromEntries(header.filter((h) => !known.has(h)).map((h) => [h, col(row, h) ?? '']));
    return {
      ...(id ? { id } : {}),
      ...(opts.template ? { variables } : {}),
      ...(!opts.template || input !== undefined ? { messages: [{ role: 'user', content: input ?? '' }] } : {}),
      ...(expected !== undefined ? { expected } : {}),
      assert: { type: col(row, 'assert') ?? 'contains', ...(value !== undefined ? { value } : {}) },
    };
  });
}
