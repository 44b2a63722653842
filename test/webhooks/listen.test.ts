import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { request } from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, seedProject, type Client, type TestApp } from '../helpers/app.ts';
import { freePort } from '../helpers/ports.ts';
import { signatureHeader } from '../../src/domain/webhooks/signing.ts';
import { createWebhook, deliveriesOf, testWorker, webhookEnv } from './support.ts';

/**
 * Issue 36: `npm run webhooks:listen` (scripts/webhooks-listen.ts), run as a user runs it: a child process that
 * prints the gateway's environment and the URL, then shows each delivery with whether its signature verified.
 * A real gateway (the test app and its delivery worker, trusting the CA file the listener printed) sends to it.
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

let t: TestApp;
let api: Client;
let listener: ChildProcess;
let out = '';
let printed: { caFile: string; allowlist: string; url: string };
let webhook: { id: string; secret: string };
let projectId: string;
/** The user's own handler that --forward-to points at (plain http on localhost). */
let handler: Server;
const forwarded: { headers: IncomingHttpHeaders; body: string }[] = [];

/** Resolves once the listener's output matches. */
function waitForOutput(re: RegExp, timeoutMs = 30_000): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const m = out.match(re);
      if (m) {
        clearInterval(timer);
        clearTimeout(deadline);
        resolve(m);
      }
    };
    const timer = setInterval(check, 25);
    const deadline = setTimeout(() => {
      clearInterval(timer);
      reject(new Error(`listener output did not match ${re} within ${timeoutMs} ms:\n${out}`));
    }, timeoutMs);
    check();
  });
}

beforeAll(async () => {
  const port = await freePort();
  // The environment the listener tells the user to set; the URL it will print is registered first, so that the
  // listener can start with the webhook's signing secret (as a user does: --secret whsec_…).
  t = await buildTestApp({ env: { ...webhookEnv(), SVC_EGRESS_ALLOWLIST: '127.0.0.1' } });
  const operator = client(t.app);
  const project = await seedProject(operator, { scopes: ['governance:manage'] });
  projectId = project.projectId;
  api = client(t.app, project.secret);
  webhook = await createWebhook(api, { project_id: projectId, url: `https://127.0.0.1:${port}/webhooks`, events: ['key.revoked'] });

  handler = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      forwarded.push({ headers: req.headers, body });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => handler.listen(0, '127.0.0.1', () => resolve()));
  const forwardTo = `http://127.0.0.1:${(handler.address() as AddressInfo).port}/hook`;

  const args = ['--port', String(port), '--secret', webhook.secret, '--forward-to', forwardTo];
  listener = spawn(process.execPath, ['--import', 'tsx', 'scripts/webhooks-listen.ts', ...args], {
    cwd: root,
    env: { ...process.env, SVC_WEBHOOK_SECRET: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  listener.stdout!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  listener.stderr!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  await waitForOutput(/Waiting for deliveries/);
  printed = {
    caFile: out.match(/^\s*NODE_EXTRA_CA_CERTS=(\S+)$/m)![1]!,
    allowlist: out.match(/^\s*SVC_EGRESS_ALLOWLIST=(\S+)$/m)![1]!,
    url: out.match(/^Webhook URL to register: (\S+)$/m)![1]!,
  };
}, 60_000);

afterAll(async () => {
  if (listener && listener.exitCode === null) {
    const exited = new Promise((resolve) => listener.once('exit', resolve));
    listener.kill('SIGTERM');
    await exited;
  }
  await new Promise((resolve) => handler?.close(resolve));
  await t?.close();
});

/** POSTs to the listener over HTTPS, trusting only the CA it printed. */
function postToListener(body: string, headers: Record<string, string>): Promise<number> {
  const url = new URL(printed.url);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: url.port, path: url.pathname, method: 'POST', ca: readFileSync(printed.caFile), headers: { 'content-type': 'application/json', ...headers } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('npm run webhooks:listen', () => {
  it('prints the environment for the gateway and the URL to register', () => {
    expect(existsSync(printed.caFile)).toBe(true);
    expect(readFileSync(printed.caFile, 'utf8')).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(printed.allowlist).toBe('127.0.0.1');
    expect(printed.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/webhooks$/);
    expect(out).toContain(`NODE_EXTRA_CA_CERTS=${printed.caFile} SVC_EGRESS_ALLOWLIST=127.0.0.1 npm start`);
    expect(out).not.toContain(webhook.secret);
  });

  it("shows a real gateway's signed webhook.test delivery as verified, and the gateway records it succeeded", async () => {
    const sent = await api.post(`/v1/webhooks/${webhook.id}/test`);
    expect(sent.status, sent.raw).toBe(200);
    // The gateway's delivery worker trusts exactly the CA file the listener printed (as NODE_EXTRA_CA_CERTS would).
    const worker = testWorker(t, { ca: readFileSync(printed.caFile, 'utf8') });
    await worker.runDue();
    await worker.stop();

    const line = await waitForOutput(new RegExp(`^.*webhook\\.test\\s+event: ${sent.body.id}.*$`, 'm'));
    expect(line[0]).toContain('verified: yes');
    expect(line[0]).toContain(`webhook: ${webhook.id}`);
    // Forwarded to the user's handler with the body and the X-Svc-* headers; its 204 is what the gateway got.
    expect(line[0]).toMatch(/answered: 204 -> http:\/\/127\.0\.0\.1:\d+\/hook 204/);
    const hit = forwarded.find((f) => f.body.includes(sent.body.id))!;
    expect(JSON.parse(hit.body)).toMatchObject({ id: sent.body.id, type: 'webhook.test' });
    expect(hit.headers['x-svc-signature']).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(hit.headers['x-svc-event']).toBe('webhook.test');
    // The body follows, pretty-printed.
    expect(out).toContain(`"webhook_id": "${webhook.id}"`);
    const [delivery] = await deliveriesOf(api, webhook.id);
    expect(delivery).toMatchObject({ event_id: sent.body.id, status: 'succeeded', response_status: 204 });
  });

  it('shows a delivery signed with another secret as not verified, and refuses it with 400', async () => {
    const body = JSON.stringify({ id: 'evt_forged', object: 'svc.webhook.event', type: 'key.revoked', data: {} });
    const status = await postToListener(body, {
      'x-svc-event': 'key.revoked',
      'x-svc-signature': signatureHeader('whsec_not_the_secret', body, Date.now() / 1000),
    });
    expect(status).toBe(400);
    expect(forwarded.some((f) => f.body.includes('evt_forged'))).toBe(false);
    const line = await waitForOutput(/^.*event: evt_forged.*$/m);
    expect(line[0]).toMatch(/verified: no \(signature does not match the secret\)/);
    expect(line[0]).toContain('answered: 400');

    // The right secret, but the body changed after signing: refused too.
    const signed = signatureHeader(webhook.secret, body, Date.now() / 1000);
    expect(await postToListener(body.replace('evt_forged', 'evt_tampered'), { 'x-svc-event': 'key.revoked', 'x-svc-signature': signed })).toBe(400);
    expect((await waitForOutput(/^.*event: evt_tampered.*$/m))[0]).toContain('verified: no');
    // And the right secret over the same bytes verifies.
    expect(await postToListener(body.replace('evt_forged', 'evt_good'), { 'x-svc-event': 'key.revoked', 'x-svc-signature': signatureHeader(webhook.secret, body.replace('evt_forged', 'evt_good'), Date.now() / 1000) })).toBe(204);
    expect((await waitForOutput(/^.*event: evt_good.*$/m))[0]).toContain('verified: yes');
  });
});
