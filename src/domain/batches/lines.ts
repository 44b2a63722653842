import { isUtf8 } from 'node:buffer';
import { SvcError } from '../../errors/svc-error.ts';
import { ChatCompletionRequest, EmbeddingsRequest, ResponsesRequest } from '../inference/schema.ts';
import { parseInput } from '../inference/validate.ts';
import { splitChunks, type JsonlLine } from './files.ts';
import type { BatchPorts } from './ports.ts';
import { MAX_BATCH_LINES, type BatchEndpoint } from './schema.ts';

/** One line of an input file, as a batch reads it: its request, or why it cannot run (line numbers from 1). */
export type ParsedLine =
  | { index: number; line: number; customId: string; body: Record<string, unknown> }
  | { index: number; line: number; customId: string; error: { code: string; message: string; param: string | null } };

const bodySchemas = { '/v1/chat/completions': ChatCompletionRequest, '/v1/embeddings': EmbeddingsRequest, '/v1/responses': ResponsesRequest } as const;

/**
 * Checks an uploaded batch file as a whole (POST /v1/files), a chunk at a time: UTF-8 JSONL with at least one line and
 * at most MAX_BATCH_LINES; each line a JSON object. What a line asks for is checked when a batch is created
 * (lineParser).
 */
export function checkBatchFile(data: Buffer): { lines: number } {
  if (!isUtf8(data)) throw new SvcError('invalid_request', { param: 'file', message: 'The file must be UTF-8 JSONL.' });
  let count = 0;
  let line = 0;
  for (const chunk of splitChunks(data)) {
    const parts = chunk.text.split('\n');
    if (chunk.text.endsWith('\n')) parts.pop();
    for (const p of parts) {
      line++;
      if (p.trim() === '') continue;
      count++;
      if (count > MAX_BATCH_LINES) throw new SvcError('invalid_request', { param: 'file', message: `The file holds more than ${MAX_BATCH_LINES} lines; a batch takes at most ${MAX_BATCH_LINES}.` });
      let v: unknown;
      try {
        v = JSON.parse(p);
      } catch {
        throw new SvcError('invalid_request', { param: 'file', message: `Line ${line} is not valid JSON.` });
      }
      if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new SvcError('invalid_request', { param: 'file', message: `Line ${line} is not a JSON object.` });
    }
  }
  if (count === 0) throw new SvcError('invalid_request', { param: 'file', message: 'The file holds no lines: a batch file is JSONL, one request a line.' });
  return { lines: count };
}

/**
 * Reads the lines of a batch's input file for `endpoint`, in order: each `{custom_id, method: "POST", url, body}`, its
 * body checked with the endpoint's own schema (the same check a live call gets), its model known and of the endpoint's
 * type. A bad line is kept with its error (it goes to the error file, by line number); a custom_id used by an earlier
 * line makes a bad line too (the parser remembers the custom_ids it has read).
 */
export function lineParser(ports: BatchPorts, endpoint: BatchEndpoint): (l: JsonlLine) => ParsedLine {
  const seen = new Set<string>();
  return ({ index, line, text: t }): ParsedLine => {
    let v: any;
    try {
      v = JSON.parse(t);
    } catch {
      return { index, line, customId: `line-${line}`, error: { code: 'invalid_request', message: `Line ${line} is not valid JSON.`, param: null } };
    }
    const customId = typeof v?.custom_id === 'string' && v.custom_id !== '' ? v.custom_id.slice(0, 512) : `line-${line}`;
    const bad = (message: string, param: string | null = null): ParsedLine => ({ index, line, customId, error: { code: 'invalid_request', message: `Line ${line}: ${message}`, param } });
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return bad('not a JSON object.');
    if (typeof v.custom_id !== 'string' || v.custom_id === '') return bad('custom_id is required (a non-empty string).', 'custom_id');
    if (seen.has(v.custom_id)) return bad(`custom_id "${customId}" is used by an earlier line.`, 'custom_id');
    seen.add(v.custom_id);
    if (v.method !== 'POST') return bad('method must be "POST".', 'method');
    if (v.url !== endpoint) return bad(`url must be the batch's endpoint, "${endpoint}".`, 'url');
    if (typeof v.body !== 'object' || v.body === null || Array.isArray(v.body)) return bad('body must be a JSON object.', 'body');
    const body = { ...v.body } as Record<string, unknown>;
    delete body.project_id; // a line runs in the batch's project
    try {
      parseInput(bodySchemas[endpoint], body);
    } catch (err) {
      if (err instanceof SvcError) return bad(err.message, err.param ? `body.${err.param}` : 'body');
      throw err;
    }
    if (body.stream === true) return bad('stream is not available in a batch.', 'body.stream');
    if (endpoint === '/v1/responses' && body.previous_response_id != null) return bad('previous_response_id is not available in a batch.', 'body.previous_response_id');
    if (typeof body.model !== 'string') return bad('body.model is required.', 'body.model');
    const type = ports.modelType(body.model);
    const wanted = endpoint === '/v1/embeddings' ? 'embedding' : 'chat';
    if (type === undefined) return bad(`unknown model "${body.model.slice(0, 200)}".`, 'body.model');
    if (type !== wanted) return bad(`${body.model.slice(0, 200)} is not a${wanted === 'chat' ? ' chat' : 'n embedding'} model, as ${endpoint} needs.`, 'body.model');
    return { index, line, customId, body };
  };
}
