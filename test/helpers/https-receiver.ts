import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import Stripe from 'stripe';

/** A private CA and a server certificate for 127.0.0.1 / localhost signed by it, generated at test time. */
export interface TestPki {
  caCert: string;
  caFile: string;
  key: string;
  cert: string;
}

let pki: TestPki | null = null;

export function testPki(): TestPki {
  if (pki) return pki;
  const dir = mkdtempSync(path.join(tmpdir(), 'svc-pki-'));
  const f = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('ca.key'), '-out', f('ca.crt'), '-days', '2',
    '-subj', '/CN=svc test CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=127.0.0.1');
  writeFileSync(f('server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  openssl('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-CAcreateserial',
    '-out', f('server.crt'), '-days', '2', '-extfile', f('server.ext'));
  pki = {
    caCert: readFileSync(f('ca.crt'), 'utf8'),
    caFile: f('ca.crt'),
    key: readFileSync(f('server.key'), 'utf8'),
    cert: readFileSync(f('server.crt'), 'utf8'),
  };
  return pki;
}

export interface Receipt {
  headers: IncomingHttpHeaders;
  rawBody: string;
  /** performance.now() when the body was complete. */
  receivedAt: number;
  /** The event as Stripe's verifier returned it, or null when verification failed (see verifyError). */
  event: Record<string, any> | null;
  verifyError: string | null;
  deliveryId: string;
  answered: number | 'hang';
}

/** How to answer one request: a status, a status after a delay, a redirect, or never (held until close()). */
export type Answer = number | 'hang' | { redirect: string } | { status: number; delayMs: number };

export interface Receiver {
  url: string;
  port: number;
  receipts: Receipt[];
  /** The webhook's signing secret, for Stripe's verifier; set it once the webhook is created. */
  secret: string | null;
  /** Secrets by webhook id (X-Svc-Webhook-Id), when one receiver serves several webhooks; they win over `secret`. */
  secrets: Map<string, string>;
  answer: (receipt: Receipt, index: number) => Answer;
  waitFor(count: number, timeoutMs?: number): Promise<Receipt[]>;
  close(): Promise<void>;
}

const stripe = new Stripe('sk_test_x');

/** A real HTTPS receiver that verifies each delivery with Stripe's own `webhooks.constructEvent`. */
export async function startReceiver(opts: { path?: string; answer?: Receiver['answer']; secret?: string } = {}): Promise<Receiver> {
  const { key, cert } = testPki();
  const waiters: { count: number; resolve: () => void }[] = [];
  const hung: ServerResponse[] = [];
  const receiver: Receiver = {
    url: '',
    port: 0,
    receipts: [],
    secret: opts.secret ?? null,
    secrets: new Map(),
    answer: opts.answer ?? (() => 200),
    waitFor: (count, timeoutMs = 10_000) =>
      new Promise((resolve, reject) => {
        if (receiver.receipts.length >= count) return resolve(receiver.receipts);
        const timer = setTimeout(
          () => reject(new Error(`receiver got ${receiver.receipts.length} of ${count} deliveries within ${timeoutMs} ms`)),
          timeoutMs,
        );
        waiters.push({
          count,
          resolve: () => {
            clearTimeout(timer);
            resolve(receiver.receipts);
          },
        });
      }),
    close: async () => {
      for (const res of hung) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server: Server = createServer({ key, cert, keepAlive: true }, (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString('utf8');
      let event: Record<string, any> | null = null;
      let verifyError: string | null = null;
      try {
        const secret = receiver.secrets.get(String(req.headers['x-svc-webhook-id'])) ?? receiver.secret;
        if (!secret) throw new Error('receiver has no secret');
        event = stripe.webhooks.constructEvent(rawBody, String(req.headers['x-svc-signature']), secret) as any;
      } catch (err) {
        verifyError = (err as Error).message;
      }
      const receipt: Receipt = {
        headers: req.headers,
        rawBody,
        receivedAt: performance.now(),
        event,
        verifyError,
        deliveryId: String(req.headers['x-svc-delivery-id']),
        answered: 200,
      };
      const answer = receiver.answer(receipt, receiver.receipts.length);
      receipt.answered = typeof answer !== 'object' ? answer : 'redirect' in answer ? 302 : answer.status;
      receiver.receipts.push(receipt);
      for (const w of waiters.filter((w) => receiver.receipts.length >= w.count)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
      if (answer === 'hang') {
        hung.push(res);
        return;
      }
      if (typeof answer === 'object' && 'redirect' in answer) {
        res.writeHead(302, { location: answer.redirect }).end();
        return;
      }
      if (typeof answer === 'object') {
        setTimeout(() => res.writeHead(answer.status, { 'content-type': 'application/json' }).end('{"received":true}'), answer.delayMs);
        return;
      }
      res.writeHead(answer, { 'content-type': 'application/json' }).end('{"received":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  receiver.port = (server.address() as AddressInfo).port;
  receiver.url = `https://127.0.0.1:${receiver.port}${opts.path ?? '/hooks'}`;
  return receiver;
}
