import { EventStreamCodec, type MessageHeaders } from '@smithy/core/event-streams';
import aws4 from 'aws4';
import { BOTH_SAMPLING_MESSAGE, ONE_SAMPLING_PARAMETER } from './fake-anthropic.ts';
import { pieces, sendJson, startFakeHttp, type FakeHttp, type Received, type Script } from './fake-http.ts';

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface FakeBedrock extends FakeHttp {
  /** The base_url for a providers file. */
  url: string;
  set(script: Script): void;
  /** Why the last refused signature was refused. */
  signatureProblem: string | null;
}

const codec = new EventStreamCodec(
  (b) => Buffer.from(b).toString('utf8'),
  (s) => Buffer.from(s, 'utf8'),
);

/** One AWS event-stream message (prelude, headers, payload, CRCs), as Bedrock frames ConverseStream events. */
export function eventFrame(type: 'event' | 'exception', name: string, payload: unknown): Uint8Array {
  const str = (value: string) => ({ type: 'string' as const, value });
  const headers: MessageHeaders =
    type === 'event'
      ? { ':event-type': str(name), ':content-type': str('application/json'), ':message-type': str('event') }
      : { ':exception-type': str(name), ':content-type': str('application/json'), ':message-type': str('exception') };
  return codec.encode({ headers, body: Buffer.from(JSON.stringify(payload), 'utf8') });
}

/**
 * Recomputes the request's SigV4 signature with aws4 from what arrived (the signed headers, x-amz-date, the raw body,
 * the path as sent) and the known credentials; null when it matches, else why not.
 */
export function checkSigV4(req: Received, creds: AwsCredentials, region: string, service = 'bedrock'): string | null {
  const auth = String(req.headers.authorization ?? '');
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) return `malformed Authorization: ${auth}`;
  const [, keyId, day, scopeRegion, scopeService, signed, signature] = m;
  if (keyId !== creds.accessKeyId) return 'unknown access key id';
  if (scopeRegion !== region || scopeService !== service) return `scope ${scopeRegion}/${scopeService}, expected ${region}/${service}`;
  const date = String(req.headers['x-amz-date'] ?? '');
  if (!date.startsWith(day!)) return 'x-amz-date does not match the credential scope';
  if (creds.sessionToken && req.headers['x-amz-security-token'] !== creds.sessionToken) return 'missing or wrong x-amz-security-token';
  const names = signed!.split(';');
  for (const required of ['host', 'x-amz-date']) if (!names.includes(required)) return `${required} is not signed`;
  const headers: Record<string, string> = {};
  for (const n of names) headers[n] = String(req.headers[n] ?? '');
  const again = { host: headers.host, path: req.url, method: req.method, service, region, headers, body: req.raw.toString('utf8') };
  aws4.sign(again, creds);
  const expected = /Signature=([0-9a-f]{64})$/.exec(String((again.headers as Record<string, string>).Authorization))?.[1];
  return expected === signature ? null : 'signature mismatch';
}

/**
 * A local server speaking Amazon Bedrock's Converse API as documented: POST /model/{modelId}/converse (JSON) and
 * /converse-stream (application/vnd.amazon.eventstream frames: messageStart, contentBlockStart/Delta/Stop,
 * messageStop, metadata; exceptions as exception frames), every request's SigV4 signature checked (403
 * InvalidSignatureException otherwise), errors as {message} with x-amzn-ErrorType. Claude 4.5-generation models
 * refuse inferenceConfig.temperature together with topP (400 ValidationException, the model's own message); usage
 * reports cacheReadInputTokens / cacheWriteInputTokens (apart from inputTokens) when the script has them.
 */
export async function startFakeBedrock(creds: AwsCredentials, region: string, initial: Script = { text: 'Hello from Bedrock.' }): Promise<FakeBedrock> {
  let script: Script = initial;
  const state = { signatureProblem: null as string | null };
  const http = await startFakeHttp((req, res) => {
    const error = (status: number, type: string, message: string) => sendJson(res, status, { message }, { 'x-amzn-errortype': `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/` });
    const m = /^\/model\/([^/]+)\/(converse|converse-stream)$/.exec(req.pathname);
    if (req.method !== 'POST' || !m) return error(404, 'UnknownOperationException', `no route ${req.pathname}`);
    state.signatureProblem = checkSigV4(req, creds, region);
    if (state.signatureProblem) {
      return error(403, 'InvalidSignatureException', `The request signature we calculated does not match the signature you provided (${state.signatureProblem}).`);
    }
    if (script.status) {
      const type = script.status === 400 ? 'ValidationException' : script.status === 429 ? 'ThrottlingException' : 'InternalServerException';
      return error(script.status, type, script.error ?? `fake status ${script.status}`);
    }
    if (!Array.isArray(req.body?.messages)) return error(400, 'ValidationException', 'messages is required');
    const inference = req.body.inferenceConfig ?? {};
    if (ONE_SAMPLING_PARAMETER.test(decodeURIComponent(m[1]!)) && inference.temperature !== undefined && inference.topP !== undefined) {
      return error(400, 'ValidationException', `The model returned the following errors: ${BOTH_SAMPLING_MESSAGE}`);
    }
    const calls = script.toolCalls ?? [];
    const stopReason = script.stop ?? (calls.length > 0 ? 'tool_use' : 'end_turn');
    const usage = script.usage === undefined ? { input: 11, output: 7 } : script.usage;
    const tokenUsage = usage
      ? {
          inputTokens: usage.input,
          outputTokens: usage.output,
          ...(usage.cacheRead !== undefined ? { cacheReadInputTokens: usage.cacheRead } : {}),
          ...(usage.cacheWrite !== undefined ? { cacheWriteInputTokens: usage.cacheWrite } : {}),
          totalTokens: usage.input + usage.output + (usage.cacheRead ?? 0) + (usage.cacheWrite ?? 0),
        }
      : undefined;
    const blocks: any[] = [];
    if (script.text) blocks.push({ text: script.text });
    for (const c of calls) blocks.push({ toolUse: { toolUseId: c.id, name: c.name, input: c.input } });
    if (m[2] === 'converse') {
      return sendJson(res, 200, { output: { message: { role: 'assistant', content: blocks } }, stopReason, usage: tokenUsage, metrics: { latencyMs: 5 } });
    }
    const frames: Uint8Array[] = [eventFrame('event', 'messageStart', { role: 'assistant', p: 'abcd' })];
    let failed = false;
    blocks.forEach((b, contentBlockIndex) => {
      if (failed) return;
      if (b.text !== undefined) {
        pieces(b.text).forEach((text, i) => {
          if (failed) return;
          frames.push(eventFrame('event', 'contentBlockDelta', { contentBlockIndex, delta: { text }, p: 'abc' }));
          if (i === 0 && script.streamError) {
            frames.push(eventFrame('exception', 'throttlingException', { message: script.streamError }));
            failed = true;
          }
        });
      } else {
        frames.push(eventFrame('event', 'contentBlockStart', { contentBlockIndex, start: { toolUse: { toolUseId: b.toolUse.toolUseId, name: b.toolUse.name } } }));
        for (const input of pieces(JSON.stringify(b.toolUse.input), 3)) {
          frames.push(eventFrame('event', 'contentBlockDelta', { contentBlockIndex, delta: { toolUse: { input } } }));
        }
      }
      if (!failed) frames.push(eventFrame('event', 'contentBlockStop', { contentBlockIndex }));
    });
    if (!failed) {
      frames.push(eventFrame('event', 'messageStop', { stopReason }));
      frames.push(eventFrame('event', 'metadata', { ...(tokenUsage ? { usage: tokenUsage } : {}), metrics: { latencyMs: 5 } }));
    }
    res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream' });
    // Split frames across writes at odd places, as TCP may: the decoder must reassemble them.
    const all = Buffer.concat(frames.map((f) => Buffer.from(f)));
    for (let i = 0; i < all.length; i += 37) res.write(all.subarray(i, i + 37));
    res.end();
  });
  return {
    ...http,
    url: http.origin,
    set: (s: Script) => (script = s),
    get signatureProblem() {
      return state.signatureProblem;
    },
  };
}
