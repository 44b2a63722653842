/**
 * npm run webhooks:listen — a local HTTPS webhook receiver for trying webhooks on one machine, like `stripe listen`.
 *
 * Starts an HTTPS server on 127.0.0.1 with a throwaway CA made at start (selfsigned: no openssl needed), prints what
 * to set for the gateway (NODE_EXTRA_CA_CERTS so that it trusts the CA, SVC_EGRESS_ALLOWLIST so that it may call
 * loopback) and the URL to register, then prints each delivery as it arrives: event type, ids, whether its
 * X-Svc-Signature verifies with the signing secret, and the body. Optionally forwards each delivery to your own
 * handler (plain http on localhost is fine there) and answers the gateway with your handler's status.
 *
 * Options (after `--`): --port N (4242; 0: any free port), --path /webhooks, --secret whsec_… (or SVC_WEBHOOK_SECRET;
 * several secrets comma-separated), --forward-to URL, --ca-dir DIR (keep the CA there and reuse it on the next start,
 * so that a running gateway keeps trusting it; default: a temporary folder removed at exit), --help.
 *
 * A delivery whose signature does not verify is answered 400 (what a real receiver must do), so the gateway records a
 * failed attempt and retries it; without a secret every delivery is answered 200 and shown as "verified: -".
 */
import { createHmac, timingSafeEqual, X509Certificate } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import selfsigned from 'selfsigned';

/** Stripe's default tolerance: a signature older (or newer) than this is refused, as a replay. */
export const SIGNATURE_TOLERANCE_S = 300;
/** Largest body read; the gateway's envelopes are far smaller. */
export const MAX_BODY_BYTES = 1024 * 1024;
const CA_DAYS = 30;

export interface ListenOptions {
  port: number;
  path: string;
  secrets: string[];
  forwardTo: string | null;
  caDir: string | null;
  /** Where lines go (stdout by default). */
  print?: (line: string) => void;
}

export interface Listener {
  url: string;
  caFile: string;
  close(): Promise<void>;
}

export type Verification = { ok: true } | { ok: false; reason: string };

/**
 * Stripe's scheme (CONTRACT §6), as stripe-node's constructEvent checks it: `t=<unix>,v1=<hex>` (any v1 may match),
 * HMAC-SHA256 keyed with the whole secret over "<t>.<raw body>", compared in constant time, within the tolerance.
 */
export function verifySignature(header: string | undefined, rawBody: Buffer, secrets: readonly string[], nowS: number): Verification {
  if (!header) return { ok: false, reason: 'no X-Svc-Signature header' };
  const parts = header.split(',').map((p) => p.trim().split('='));
  const t = Number(parts.find(([k]) => k === 't')?.[1]);
  const v1s = parts.filter(([k, v]) => k === 'v1' && v !== undefined).map(([, v]) => v!);
  if (!Number.isInteger(t) || v1s.length === 0) return { ok: false, reason: 'malformed X-Svc-Signature header' };
  for (const secret of secrets) {
    const expected = createHmac('sha256', secret).update(`${t}.`, 'utf8').update(rawBody).digest();
    for (const v1 of v1s) {
      const given = Buffer.from(v1, 'hex');
      if (given.length === expected.length && timingSafeEqual(given, expected)) {
        if (Math.abs(nowS - t) > SIGNATURE_TOLERANCE_S) return { ok: false, reason: `timestamp ${t} outside the ${SIGNATURE_TOLERANCE_S} s tolerance` };
        return { ok: true };
      }
    }
  }
  return { ok: false, reason: secrets.length > 1 ? 'no secret matches the signature' : 'signature does not match the secret' };
}

interface Pki {
  caFile: string;
  key: string;
  cert: string;
}

const later = (days: number) => new Date(Date.now() + days * 86_400_000);

/** A CA (kept in `dir` for reuse while valid for another day) and a server certificate for 127.0.0.1/localhost. */
async function makePki(dir: string): Promise<Pki> {
  const caFile = path.join(dir, 'ca.pem');
  const caKeyFile = path.join(dir, 'ca-key.pem');
  let ca: { cert: string; key: string } | null = null;
  if (existsSync(caFile) && existsSync(caKeyFile)) {
    const cert = readFileSync(caFile, 'utf8');
    if (new Date(new X509Certificate(cert).validTo).getTime() > later(1).getTime()) ca = { cert, key: readFileSync(caKeyFile, 'utf8') };
  }
  if (!ca) {
    const made = await selfsigned.generate([{ name: 'commonName', value: 'svc webhooks listen local CA' }], {
      keyType: 'ec',
      algorithm: 'sha256',
      notAfterDate: later(CA_DAYS),
      extensions: [
        { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
        { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
      ],
    });
    ca = { cert: made.cert, key: made.private };
    writeFileSync(caKeyFile, ca.key, { mode: 0o600 });
    writeFileSync(caFile, ca.cert);
  }
  const leaf = await selfsigned.generate([{ name: 'commonName', value: '127.0.0.1' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    notAfterDate: later(1),
    ca: { key: ca.key, cert: ca.cert },
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }, { type: 2, value: 'localhost' }] },
    ],
  });
  return { caFile, key: leaf.private, cert: leaf.cert };
}

function readBody(req: IncomingMessage): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        resolve(null);
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

const header = (req: IncomingMessage, name: string) => {
  const v = req.headers[name];
  return typeof v === 'string' ? v : undefined;
};

function prettyBody(raw: Buffer): string {
  const text = raw.toString('utf8');
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

/** Starts the receiver; resolves once it listens. */
export async function startListener(opts: ListenOptions): Promise<Listener> {
  const print = opts.print ?? ((line: string) => process.stdout.write(`${line}\n`));
  const temporary = opts.caDir === null;
  const dir = opts.caDir ?? mkdtempSync(path.join(tmpdir(), 'svc-webhooks-listen-'));
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const pki = await makePki(dir);

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const answer = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.method !== 'POST' || (req.url ?? '').split('?')[0] !== opts.path) return answer(404, { error: `POST ${opts.path} only` });
    const raw = await readBody(req);
    if (raw === null) return answer(413, { error: `body over ${MAX_BODY_BYTES} bytes` });
    const type = header(req, 'x-svc-event') ?? '?';
    let eventId = '?';
    try {
      eventId = String((JSON.parse(raw.toString('utf8')) as { id?: unknown }).id ?? '?');
    } catch {}
    const verification = opts.secrets.length ? verifySignature(header(req, 'x-svc-signature'), raw, opts.secrets, Date.now() / 1000) : null;
    const verified = verification === null ? '- (no secret: pass --secret whsec_...)' : verification.ok ? 'yes' : `no (${verification.reason})`;
    let status = verification && !verification.ok ? 400 : 200;
    let forwarded = '';
    let responseBody: unknown = { received: true };
    if (opts.forwardTo && status === 200) {
      try {
        const forwardHeaders: Record<string, string> = { 'content-type': header(req, 'content-type') ?? 'application/json' };
        for (const [name, value] of Object.entries(req.headers)) {
          if (name.startsWith('x-svc-') && typeof value === 'string') forwardHeaders[name] = value;
        }
        const r = await fetch(opts.forwardTo, { method: 'POST', headers: forwardHeaders, body: new Uint8Array(raw), signal: AbortSignal.timeout(9_000) });
        await r.arrayBuffer();
        status = r.status;
        forwarded = ` -> ${opts.forwardTo} ${r.status}`;
        responseBody = { forwarded: r.status };
      } catch (err) {
        status = 502;
        forwarded = ` -> ${opts.forwardTo} failed: ${(err as Error).message}`;
        responseBody = { error: 'forward failed' };
      }
    }
    const time = new Date().toISOString().slice(11, 19);
    print(
      `${time}  ${type}  event: ${eventId}  delivery: ${header(req, 'x-svc-delivery-id') ?? '?'}  webhook: ${header(req, 'x-svc-webhook-id') ?? '?'}` +
        `  verified: ${verified}  answered: ${status}${forwarded}`,
    );
    print(prettyBody(raw));
    answer(status, responseBody);
  };

  const server: Server = createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    handle(req, res).catch((err: Error) => {
      print(`error: ${err.message}`);
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `https://127.0.0.1:${port}${opts.path}`;
  return {
    url,
    caFile: pki.caFile,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      if (temporary) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** What the listener prints at start: the gateway's environment, the URL, and how to send a test event. */
export function banner(listener: Listener, opts: ListenOptions, gateway = 'http://127.0.0.1:8080'): string {
  const env = `NODE_EXTRA_CA_CERTS=${listener.caFile} SVC_EGRESS_ALLOWLIST=127.0.0.1`;
  return [
    `svc webhooks listen: ready at ${listener.url}`,
    '',
    'Start the gateway with this environment (Node reads NODE_EXTRA_CA_CERTS at start only; if SVC_EGRESS_ALLOWLIST',
    'is already set, add 127.0.0.1 to it):',
    `  NODE_EXTRA_CA_CERTS=${listener.caFile}`,
    '  SVC_EGRESS_ALLOWLIST=127.0.0.1',
    `  e.g.  ${env} npm start`,
    '',
    `Webhook URL to register: ${listener.url}`,
    `  curl -s ${gateway}/v1/webhooks -H "Authorization: Bearer $SVC_KEY" -H 'content-type: application/json' \\`,
    `    -d '{"project_id":"<proj_...>","url":"${listener.url}","events":["inference.completed"]}'`,
    `Send it a test event:  curl -s -X POST ${gateway}/v1/webhooks/<wh_...>/test -H "Authorization: Bearer $SVC_KEY"`,
    opts.secrets.length
      ? `Verifying signatures with ${opts.secrets.length} secret${opts.secrets.length > 1 ? 's' : ''}.`
      : 'Not verifying signatures: start with --secret whsec_... (the secret the webhook was created with) to check them.',
    opts.forwardTo ? `Forwarding each verified delivery to ${opts.forwardTo}.` : '',
    opts.caDir === null ? 'The CA is temporary: pass --ca-dir DIR to keep it, so that a restart of this needs no restart of the gateway.' : '',
    '',
    'Waiting for deliveries (Ctrl-C to stop).',
  ]
    .filter((line, i, all) => line !== '' || all[i - 1] !== '')
    .join('\n');
}

const USAGE = `npm run webhooks:listen -- [--port 4242] [--path /webhooks] [--secret whsec_...] [--forward-to URL] [--ca-dir DIR]
  --secret      signing secret(s) to verify with, comma-separated (or SVC_WEBHOOK_SECRET)
  --forward-to  also POST each verified delivery (body and X-Svc-* headers) to this URL and answer with its status
  --ca-dir      keep the CA in DIR and reuse it next time (default: a temporary folder removed at exit)`;

export function parseListenArgs(argv: string[], env: NodeJS.ProcessEnv): ListenOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: 'string', default: '4242' },
      path: { type: 'string', default: '/webhooks' },
      secret: { type: 'string' },
      'forward-to': { type: 'string' },
      'ca-dir': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port must be 0-65535, got "${values.port}"`);
  const p = values.path!.startsWith('/') ? values.path! : `/${values.path}`;
  const secrets = (values.secret ?? env.SVC_WEBHOOK_SECRET ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  for (const s of secrets) if (!s.startsWith('whsec_')) throw new Error('--secret must be a webhook signing secret (whsec_...)');
  const forwardTo = values['forward-to'] ?? null;
  if (forwardTo !== null) {
    const proto = URL.canParse(forwardTo) ? new URL(forwardTo).protocol : '';
    if (proto !== 'http:' && proto !== 'https:') throw new Error(`--forward-to must be an http(s) URL, got "${forwardTo}"`);
  }
  return { port, path: p, secrets, forwardTo, caDir: values['ca-dir'] ? path.resolve(values['ca-dir']) : null };
}

async function main(): Promise<void> {
  let opts: ListenOptions;
  try {
    opts = parseListenArgs(process.argv.slice(2), process.env);
  } catch (err) {
    process.stderr.write(`webhooks:listen: ${(err as Error).message}\n${USAGE}\n`);
    process.exit(2);
  }
  const listener = await startListener(opts);
  process.stdout.write(`${banner(listener, opts)}\n`);
  const stop = () => {
    void listener.close().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: Error) => {
    process.stderr.write(`webhooks:listen: ${err.message}\n`);
    process.exit(1);
  });
}
