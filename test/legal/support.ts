import { PDFDocument, StandardFonts } from 'pdf-lib';
import { expect } from 'vitest';
import type { Client, TestApp } from '../helpers/app.ts';
import { multipart } from '../rag/support.ts';

/** A Legal key as spec §5.6 has it: legal:write plus inference:write (model work). */
export const LEGAL = ['legal:write', 'inference:write'];

export const CONTRACT_TEXT = [
  'MASTER SUPPLY AGREEMENT',
  '',
  '1. Term. This Agreement starts on 1 March 2026 and runs for two (2) years.',
  '2. Payment. Invoices are payable within sixty (60) days of receipt.',
  '3. Governing law. This Agreement is governed by the laws of England and Wales.',
  '4. Liability. The original liability cap is the fees paid in the prior 12 months.',
  '5. Notices. Notices are given in writing; a quote of this clause is not needed.',
  '',
].join('\n');

export async function newMatter(api: Client, body: Record<string, unknown> = { name: 'Acme supply agreement', client: 'Acme Ltd' }) {
  const res = await api.post('/v1/legal/matters', body);
  expect(res.status, res.raw).toBe(200);
  return res.body;
}

export async function newContract(api: Client, matterId: string, content = CONTRACT_TEXT, name = 'msa.txt') {
  const res = await api.post(`/v1/legal/matters/${matterId}/contracts`, { name, content });
  expect(res.status, res.raw).toBe(200);
  return res.body;
}

/** POST a contract as a multipart form (curl -F file=@… -F name=…). */
export async function uploadContract(
  t: TestApp,
  key: string,
  matterId: string,
  file: { name: string; type: string; data: Buffer | string },
  fields: Record<string, string> = {},
  headers: Record<string, string> = {},
) {
  const { payload, contentType } = multipart(file, fields);
  const res = await t.app.inject({
    method: 'POST',
    url: `/v1/legal/matters/${matterId}/contracts`,
    headers: { authorization: `Bearer ${key}`, 'content-type': contentType, ...headers },
    payload,
  });
  let body: any = null;
  try {
    body = JSON.parse(res.body);
  } catch {
    body = null;
  }
  return { status: res.statusCode, headers: res.headers, body, raw: res.body };
}

/** A one-page PDF with these lines, made here with pdf-lib. */
export async function makePdf(lines: string[]): Promise<Buffer> {
  const pdf = await PDFDocument.create();
  const font = await pdf.embedFont(StandardFonts.Helvetica);
  const page = pdf.addPage([600, 800]);
  lines.forEach((line, i) => page.drawText(line, { x: 50, y: 750 - i * 20, size: 12, font }));
  return Buffer.from(await pdf.save());
}
