import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, client, type Client, type TestApp } from '../helpers/app.ts';
import { uniqueName } from '../helpers/services.ts';
import { expectGqlError, expectGqlHiddenFrom, expectGqlScopeRequired, gqlClient, type Gql } from '../graphql/gql.ts';
import { runVerticalWork, verticalProject } from '../verticals/support.ts';
import { CONTRACT_TEXT, LEGAL } from './support.ts';

let t: TestApp;
let operator: Client;
let gql: Gql;

beforeAll(async () => {
  // A GraphQL body is held to SVC_BODY_LIMIT_BYTES (1 MB by default): raised so that a contract over the starter
  // plan's 1 MB reaches the service (as test/rag/rag.graphql.test.ts does).
  t = await buildTestApp({ env: { SVC_BODY_LIMIT_BYTES: String(3 * 1024 * 1024) } });
  operator = client(t.app);
  gql = gqlClient(t.app);
});
afterAll(() => t.close());

const CREATE_MATTER = 'mutation($i: CreateLegalMatterInput!) { createLegalMatter(input: $i) { id status name client } }';
const CREATE_CONTRACT = 'mutation($m: ID!, $i: CreateLegalContractInput!) { createLegalContract(matterId: $m, input: $i) { id matterId sha256 characters } }';
const MAP = 'mutation($c: ID!, $i: RequestLegalMappingInput!) { requestLegalMapping(contractId: $c, input: $i) { id status fields { name quoteVerified } } }';
const REDLINE = 'mutation($c: ID!, $i: RequestLegalRedlineInput!) { requestLegalRedline(contractId: $c, input: $i) { id status playbook } }';
const UPDATE = 'mutation($id: ID!, $i: UpdateLegalMatterInput!) { updateLegalMatter(id: $id, input: $i) { id name } }';
const CLOSE = 'mutation($id: ID!, $r: String) { closeLegalMatter(id: $id, reason: $r) { id status closeReason } }';

async function matterWithContract(secret: string) {
  const m = await gql(CREATE_MATTER, { i: { name: 'Acme supply agreement', client: 'Acme Ltd' } }, { key: secret });
  const matterId = m.body.data.createLegalMatter.id as string;
  const c = await gql(CREATE_CONTRACT, { m: matterId, i: { name: 'msa.txt', content: CONTRACT_TEXT } }, { key: secret });
  expect(c.body.errors, c.raw).toBeUndefined();
  return { matterId, contractId: c.body.data.createLegalContract.id as string };
}

describe('Legal on GraphQL', () => {
  it('a matter, a contract, a mapping and a redline, then read back in one query', async () => {
    const p = await verticalProject(operator, LEGAL);
    const key = { key: p.secret };
    const { matterId, contractId } = await matterWithContract(p.secret);
    const map = await gql(MAP, { c: contractId, i: { fields: [{ name: 'name', description: 'title' }, { name: 'term' }], instructions: 'brief' } }, key);
    expect(map.body.data.requestLegalMapping).toMatchObject({ status: 'queued', fields: [{ name: 'name', quoteVerified: null }, { name: 'term', quoteVerified: null }] });
    const red = await gql(REDLINE, { c: contractId, i: { playbook: 'Cap liability.' } }, key);
    expect(red.body.data.requestLegalRedline).toMatchObject({ status: 'queued', playbook: 'Cap liability.' });
    expect(await runVerticalWork(t)).toEqual(['succeeded', 'succeeded']);
    const view = await gql(
      `query($id: ID!) { legalMatter(id: $id) { name status contracts { edges { node { id name text
        mappings { edges { node { status flaggedQuotes fields { name value quote found quoteVerified quoteStart } } } }
        redlines { edges { node { status summary unappliedEdits diff edits { original proposed applied notApplied occurrences } } } } } } } } }`,
      { id: matterId },
      key,
    );
    expect(view.body.errors, view.raw).toBeUndefined();
    const contract = view.body.data.legalMatter.contracts.edges[0].node;
    expect(contract).toMatchObject({ id: contractId, name: 'msa.txt', text: CONTRACT_TEXT });
    expect(contract.mappings.edges[0].node).toEqual({
      status: 'completed',
      flaggedQuotes: 0,
      fields: [
        { name: 'name', value: 'value', quote: 'quote', found: true, quoteVerified: true, quoteStart: CONTRACT_TEXT.indexOf('quote') },
        { name: 'term', value: null, quote: null, found: null, quoteVerified: null, quoteStart: null },
      ],
    });
    const redline = contract.redlines.edges[0].node;
    expect(redline).toMatchObject({ status: 'completed', summary: 'summary', unappliedEdits: 0, edits: [{ original: 'original', proposed: 'proposed', applied: true, notApplied: null, occurrences: 1 }] });
    expect(redline.diff).toContain('-4. Liability. The original liability cap');
    expect(redline.diff).toContain('+4. Liability. The proposed liability cap');
    const list = await gql('{ legalMatters(status: "open") { edges { node { id } } } }', {}, key);
    expect(list.body.data.legalMatters.edges.map((e: any) => e.node.id)).toEqual([matterId]);
  });

  it('matter_closed on every kind of write under a closed matter; closing again returns it unchanged', async () => {
    const p = await verticalProject(operator, LEGAL);
    const key = { key: p.secret };
    const { matterId, contractId } = await matterWithContract(p.secret);
    const closed = await gql(CLOSE, { id: matterId, r: 'Signed' }, key);
    expect(closed.body.data.closeLegalMatter).toEqual({ id: matterId, status: 'closed', closeReason: 'Signed' });
    const again = await gql(CLOSE, { id: matterId, r: 'Other' }, key);
    expect(again.body.data.closeLegalMatter).toEqual({ id: matterId, status: 'closed', closeReason: 'Signed' });
    const opts = { httpStatus: 409, param: 'matter_id' };
    expectGqlError(await gql(UPDATE, { id: matterId, i: { name: 'Renamed' } }, key), 'matter_closed', { ...opts, path: ['updateLegalMatter'] });
    expectGqlError(await gql(CREATE_CONTRACT, { m: matterId, i: { name: 'x', content: 'x' } }, key), 'matter_closed', { ...opts, path: ['createLegalContract'] });
    expectGqlError(await gql(MAP, { c: contractId, i: { fields: [{ name: 'term' }] } }, key), 'matter_closed', { ...opts, path: ['requestLegalMapping'] });
    expectGqlError(await gql(REDLINE, { c: contractId, i: { instructions: 'x' } }, key), 'matter_closed', { ...opts, path: ['requestLegalRedline'] });
    const audit = await operator.get('/v1/audit/events', { query: { project_id: p.projectId, action: 'legal_matter.close' } });
    expect(audit.body.data).toHaveLength(1);
  });

  it('document_too_large and the input checks, as on REST', async () => {
    const p = await verticalProject(operator, LEGAL);
    const key = { key: p.secret };
    const { matterId, contractId } = await matterWithContract(p.secret);
    const big = await gql(CREATE_CONTRACT, { m: matterId, i: { name: 'big', content: 'a'.repeat(1024 * 1024 + 1) } }, key);
    expectGqlError(big, 'document_too_large', { httpStatus: 413, param: 'content', path: ['createLegalContract'] });
    expectGqlError(await gql(REDLINE, { c: contractId, i: {} }, key), 'invalid_request', { httpStatus: 400, param: 'playbook' });
    expectGqlError(await gql(MAP, { c: contractId, i: { fields: [{ name: 'a' }, { name: 'a' }] } }, key), 'invalid_request', { param: 'fields[1].name' });
  });

  it('scopes: a dev:write key opens nothing of Legal, legal:read reads, model work needs inference:write; other projects look absent', async () => {
    const p = await verticalProject(operator, LEGAL);
    const { matterId, contractId } = await matterWithContract(p.secret);
    const key = async (scopes: string[]) => (await operator.post('/v1/keys', { project_id: p.projectId, name: uniqueName('k'), scopes })).body.secret as string;
    const dev = await key(['dev:write', 'inference:write']);
    await expectGqlScopeRequired(gql, dev, [
      { field: 'legalMatters', query: '{ legalMatters { edges { node { id } } } }' },
      { field: 'legalMatter', query: 'query($id: ID!) { legalMatter(id: $id) { id } }', variables: { id: matterId } },
      { field: 'createLegalMatter', query: 'mutation { createLegalMatter(input: { name: "x" }) { id } }' },
      { field: 'requestLegalMapping', query: MAP, variables: { c: contractId, i: { fields: [{ name: 'term' }] } } },
    ]);
    const reader = await key(['legal:read']);
    const read = await gql('query($id: ID!) { legalContract(id: $id) { id sha256 } }', { id: contractId }, { key: reader });
    expect(read.body.data.legalContract.id).toBe(contractId);
    await expectGqlScopeRequired(gql, reader, [
      { field: 'closeLegalMatter', query: CLOSE, variables: { id: matterId } },
      { field: 'createLegalContract', query: CREATE_CONTRACT, variables: { m: matterId, i: { name: 'x', content: 'x' } } },
    ]);
    const noInference = await key(['legal:write']);
    expectGqlError(await gql(REDLINE, { c: contractId, i: { instructions: 'x' } }, { key: noInference }), 'insufficient_scope', { httpStatus: 403, path: ['requestLegalRedline'] });

    const other = await verticalProject(operator, LEGAL);
    await expectGqlHiddenFrom(gql, other.secret, [
      { field: 'legalMatter', query: 'query($id: ID!) { legalMatter(id: $id) { id } }', variables: { id: matterId } },
      { field: 'legalContract', query: 'query($id: ID!) { legalContract(id: $id) { id } }', variables: { id: contractId } },
      { field: 'updateLegalMatter', query: UPDATE, variables: { id: matterId, i: { name: 'x' } } },
      { field: 'closeLegalMatter', query: CLOSE, variables: { id: matterId } },
      { field: 'createLegalContract', query: CREATE_CONTRACT, variables: { m: matterId, i: { name: 'x', content: 'x' } } },
      { field: 'requestLegalMapping', query: MAP, variables: { c: contractId, i: { fields: [{ name: 'term' }] } } },
      { field: 'requestLegalRedline', query: REDLINE, variables: { c: contractId, i: { instructions: 'x' } } },
    ]);
    const mapping = (await gql(MAP, { c: contractId, i: { fields: [{ name: 'term' }] } }, { key: p.secret })).body.data.requestLegalMapping.id;
    await expectGqlHiddenFrom(gql, other.secret, [
      { field: 'legalMapping', query: 'query($id: ID!) { legalMapping(id: $id) { id } }', variables: { id: mapping } },
      { field: 'legalRedline', query: 'query($id: ID!) { legalRedline(id: $id) { id } }', variables: { id: mapping } },
    ]);
  });
});
