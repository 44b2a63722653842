import type { ContentSealer } from '../../domain/privacy/ports.ts';
import { outcomeAtRest } from '../../domain/privacy/store.ts';
import type { RetainedContent } from '../../domain/privacy/types.ts';
import type { InferenceOutcome } from '../../domain/usage/outcome.ts';

type Wire = Omit<InferenceOutcome, 'costMicros' | 'createdAt'> & { costMicros: string; createdAt: number };

const toWire = (o: InferenceOutcome): Wire => ({ ...o, costMicros: o.costMicros.toString(), createdAt: o.createdAt.getTime() });
const fromWire = (raw: Wire): InferenceOutcome => ({ ...raw, costMicros: BigInt(raw.costMicros), createdAt: new Date(raw.createdAt) });

/**
 * The write-ahead form of one outcome (a Redis stream field, a dead letter, a log line): JSON, money as a decimal
 * string, times in ms, its retained content sealed as the row would hold it (privacy/store.ts, outcomeAtRest).
 */
export function encodeOutcome(o: InferenceOutcome, sealer: ContentSealer): string {
  return JSON.stringify(toWire(outcomeAtRest(sealer, o)));
}

export function decodeOutcome(text: string): InferenceOutcome {
  return fromWire(JSON.parse(text) as Wire);
}

/**
 * The outcomes of one turn as one usage stream entry (redis-stream.ts): `outcomes` is their JSON array with the
 * retained contents taken out; `contents` is the JSON array of those contents in the same order (null where an
 * outcome has none), to be sealed as a whole, or null when no outcome of the turn retains content (zero retention).
 */
export function encodeOutcomeBatch(batch: readonly InferenceOutcome[]): { outcomes: string; contents: string | null } {
  let contents: (RetainedContent | null)[] | null = null;
  const wire = batch.map((o, i) => {
    const content = o.retained?.content;
    if (!content) return toWire(o);
    (contents ??= new Array<RetainedContent | null>(batch.length).fill(null))[i] = content;
    return toWire({ ...o, retained: { ...o.retained!, content: null } });
  });
  return { outcomes: JSON.stringify(wire), contents: contents ? JSON.stringify(contents) : null };
}

/** The entry back: each outcome with its retained content (from `contents`, opened already) put back in. */
export function decodeOutcomeBatch(outcomes: string, contents: string | null): InferenceOutcome[] {
  const list = (JSON.parse(outcomes) as Wire[]).map(fromWire);
  if (contents === null) return list;
  const parsed = JSON.parse(contents) as (RetainedContent | null)[];
  if (!Array.isArray(parsed) || parsed.length !== list.length) throw new Error('the sealed contents do not match the entry');
  for (let i = 0; i < list.length; i++) {
    const c = parsed[i];
    if (c) list[i] = { ...list[i]!, retained: { ...list[i]!.retained!, content: c } };
  }
  return list;
}

/**
 * One turn's outcomes as the fields of one usage-stream entry: `b`, their JSON array (encodeOutcomeBatch) without the
 * retained contents, and `c`, the contents sealed together (one AES-GCM per turn, not per request; the `b` text is the
 * associated data, so sealed contents moved onto another entry do not open), left out when none retains content. An
 * entry of an earlier version (`o`: one outcome, its content sealed alone) is still read (decodeStreamEntry).
 */
export function streamEntryFields(outcomes: InferenceOutcome[], sealer: ContentSealer): string[] {
  const { outcomes: text, contents } = encodeOutcomeBatch(outcomes);
  return contents === null ? ['b', text] : ['b', text, 'c', sealer.seal(contents, text)];
}

/** An entry's outcomes, contents opened (both entry forms: see streamEntryFields). Throws on an entry that cannot be read. */
export function decodeStreamEntry(fields: string[], sealer: ContentSealer): InferenceOutcome[] {
  const at = fields.indexOf('b');
  if (at < 0) return [decodeOutcome(fields[fields.indexOf('o') + 1] ?? '')];
  const text = fields[at + 1] ?? '';
  const c = fields.indexOf('c');
  return decodeOutcomeBatch(text, c < 0 ? null : sealer.open(fields[c + 1] ?? '', text));
}
