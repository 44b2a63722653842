import { useState } from 'preact/hooks';
import { NewVerticalObject, VERTICAL_CREATES } from './verticals-create.ts';
import type { Viewer } from '../viewer.ts';
import { ApiError, gql } from '../api.ts';
import { Card, ErrorBox, Pager, QueuedBanner, Status, fmtTime, html, usePager, useQuery } from '../ui.ts';

interface RiskCase {
  id: string;
  title: string;
  assignee: string;
  reviewer: string;
  status: string;
  disposition: string | null;
  createdAt: number;
}
interface Evidence {
  id: string;
  name: string;
  contentType: string;
  size: number;
  sha256: string;
  description: string | null;
  createdAt: number;
}
interface Report {
  id: string;
  status: string;
  content: Record<string, unknown> | null;
  approvedBy: string | null;
  approvedAt: number | null;
  approval: { id: string; status: string; requestedBy: string; decidedBy: string | null } | null;
  createdAt: number;
}
type CasePage = { riskCases: { edges: { node: RiskCase }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } };
type CaseView = {
  riskCase: RiskCase & {
    evidence: { edges: { node: Evidence }[] };
    assessments: { edges: { node: { id: string; status: string; content: Record<string, unknown> | null; createdAt: number } }[] };
    reports: { edges: { node: Report }[] };
  };
};

const CASE_FIELDS = 'id title assignee reviewer status disposition createdAt';
const LIST = `query RiskCases($projectId: ID, $after: String) {
  riskCases(projectId: $projectId, first: 20, after: $after) { edges { node { ${CASE_FIELDS} } } pageInfo { hasNextPage endCursor } }
}`;
const VIEW = `query RiskCase($id: ID!) { riskCase(id: $id) { ${CASE_FIELDS}
  evidence(first: 100) { edges { node { id name contentType size sha256 description createdAt } } }
  assessments(first: 20) { edges { node { id status content createdAt } } }
  reports(first: 20) { edges { node { id status content approvedBy approvedAt createdAt approval { id status requestedBy decidedBy } } } }
} }`;
const APPROVE = `mutation ApproveReport($id: ID!) { approveRiskReport(id: $id) { id } }`;

/** One case: its evidence with the SHA-256 fixed at upload, its drafts, and each report's dual control state. */
function CaseView({ id, onBack }: { id: string; onBack: () => void }) {
  const [refresh, setRefresh] = useState(0);
  const [queued, setQueued] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const view = useQuery(() => gql<CaseView>(VIEW, { id }), [id, refresh]);
  const c = view.data?.riskCase;
  const askApproval = async (reportId: string) => {
    try {
      await gql(APPROVE, { id: reportId });
    } catch (err) {
      // Always dual control: the call is queued as an approval another key decides.
      if (err instanceof ApiError && err.approvalId) setQueued(err.approvalId);
      else setError(err);
    }
    setRefresh(refresh + 1);
  };
  return html`<${Card} title=${c ? `Case ${c.title}` : 'Case'}>
    <p><button type="button" onClick=${onBack}>← All cases</button></p>
    <${ErrorBox} error=${view.error ?? error} />
    ${queued ? html`<${QueuedBanner} approvalId=${queued} />` : null}
    ${c
      ? html`<dl class="facts" aria-label="Case">
          <dt>Id</dt><dd><code>${c.id}</code></dd>
          <dt>Status</dt><dd><${Status} value=${c.status} />${c.disposition ? html` · ${c.disposition}` : null}</dd>
          <dt>Assignee</dt><dd>${c.assignee}</dd><dt>Reviewer</dt><dd>${c.reviewer}</dd>
        </dl>
        <h3>Evidence</h3>
        ${c.evidence.edges.length === 0
          ? html`<p class="empty">No evidence yet.</p>`
          : html`<table aria-label="Evidence"><thead><tr><th>Name</th><th>Type</th><th>Size</th><th>SHA-256</th><th>Uploaded</th></tr></thead>
              <tbody>${c.evidence.edges.map(({ node: e }) => html`<tr data-evidence-id=${e.id}>
                <td>${e.name}${e.description ? html`<div class="muted">${e.description}</div>` : null}</td><td>${e.contentType}</td><td>${e.size} B</td>
                <td class="mono sha256">${e.sha256}</td><td>${fmtTime(e.createdAt)}</td></tr>`)}</tbody></table>`}
        <h3>Assessments</h3>
        ${c.assessments.edges.length === 0
          ? html`<p class="empty">No assessments yet.</p>`
          : c.assessments.edges.map(({ node: a }) => html`<article data-assessment-id=${a.id}><header><code>${a.id}</code> <${Status} value=${a.status} /></header>
              ${a.content ? html`<${AssessmentView} content=${a.content} />` : null}</article>`)}
        <h3>Reports</h3>
        ${c.reports.edges.length === 0
          ? html`<p class="empty">No reports yet.</p>`
          : c.reports.edges.map(({ node: r }) => html`<article class="report" data-report-id=${r.id}>
              <header><code>${r.id}</code> <${Status} value=${r.status} />
                <span class="muted approval-state"> approval: ${r.approval
                  ? html`<code>${r.approval.id}</code> <${Status} value=${r.approval.status} /> requested by <code>${r.approval.requestedBy}</code>${r.approval.decidedBy ? html`, decided by <code>${r.approval.decidedBy}</code>` : null}`
                  : 'not asked'}</span></header>
              ${r.content ? html`<${ReportView} content=${r.content} />` : null}
              ${r.status === 'completed' && (!r.approval || r.approval.status !== 'pending')
                ? html`<button type="button" onClick=${() => askApproval(r.id)}>Ask for approval</button>`
                : null}
            </article>`)}`
      : null}
  <//>`;
}

type Json = Record<string, unknown>;
const text = (v: unknown) => (typeof v === 'string' ? v : '');
const list = (v: unknown): Json[] => (Array.isArray(v) ? (v.filter((x) => x && typeof x === 'object') as Json[]) : []);
/** A result of another shape (a project's own template may ask for other fields) is shown as it came. */
const Raw = ({ content }: { content: unknown }) => html`<pre class="mono">${JSON.stringify(content, null, 2)}</pre>`;

/** An assessment (the built-in risk.assessment's fields) as a short document. */
function AssessmentView({ content }: { content: Json }) {
  if (typeof content.summary !== 'string') return html`<${Raw} content=${content} />`;
  return html`<div class="risk-document">
    <p>${content.summary}</p>
    <p><strong>Likelihood</strong> ${text(content.likelihood)} · <strong>Impact</strong> ${text(content.impact)}</p>
    ${list(content.risks).length > 0
      ? html`<table aria-label="Risks"><thead><tr><th>Risk</th><th>Severity</th><th>Rationale</th></tr></thead>
          <tbody>${list(content.risks).map((r) => html`<tr><td>${text(r.title)}</td><td>${text(r.severity)}</td><td>${text(r.rationale)}</td></tr>`)}</tbody></table>`
      : null}
    ${Array.isArray(content.recommendations) && content.recommendations.length > 0
      ? html`<h4>Recommendations</h4><ul>${content.recommendations.map((x) => html`<li>${text(x)}</li>`)}</ul>`
      : null}
  </div>`;
}

/** A report (the built-in risk.report's fields) as a document: its findings cite evidence by id. */
function ReportView({ content }: { content: Json }) {
  if (typeof content.title !== 'string') return html`<${Raw} content=${content} />`;
  return html`<div class="risk-document">
    <h4>${content.title}</h4>
    <p>${text(content.executive_summary)}</p>
    ${list(content.findings).length > 0
      ? html`<ol aria-label="Findings">${list(content.findings).map((f) => html`<li>${text(f.finding)}${Array.isArray(f.evidence_ids) && f.evidence_ids.length > 0
          ? html` <span class="muted">(evidence ${f.evidence_ids.map((id, i) => html`${i > 0 ? ', ' : ''}<code>${text(id)}</code>`)})</span>`
          : null}</li>`)}</ol>`
      : null}
    <p><strong>Conclusion</strong> ${text(content.conclusion)}</p>
  </div>`;
}

/** The Risk vertical (CONTRACT §16): cases newest first, and one case with its evidence hashes and approval state. */
export function RiskScreen({ projectId, viewer }: { projectId: string; viewer: Viewer }) {
  const pager = usePager();
  const [open, setOpen] = useState<string | null>(null);
  const list = useQuery(() => gql<CasePage>(LIST, { projectId, after: pager.after }), [projectId, pager.after]);
  if (open) return html`<${CaseView} id=${open} onBack=${() => setOpen(null)} />`;
  const rows = list.data?.riskCases.edges.map((e) => e.node) ?? [];
  return html`<${Card} title="Risk cases">
    <${NewVerticalObject} spec=${VERTICAL_CREATES.risk} projectId=${projectId} scopes=${viewer.scopes} onCreated=${list.reload} />
    <${ErrorBox} error=${list.error} />
    ${list.data && rows.length === 0 ? html`<p class="empty">No cases yet.</p>` : null}
    ${rows.length
      ? html`<table aria-label="Risk cases"><thead><tr><th>Title</th><th>Status</th><th>Assignee</th><th>Reviewer</th><th>Opened</th></tr></thead>
          <tbody>${rows.map((c) => html`<tr data-case-id=${c.id}>
            <td><a href="#" onClick=${(e: Event) => (e.preventDefault(), setOpen(c.id))}>${c.title}</a></td>
            <td><${Status} value=${c.status} />${c.disposition ? html` · ${c.disposition}` : null}</td><td>${c.assignee}</td><td>${c.reviewer}</td><td>${fmtTime(c.createdAt)}</td>
          </tr>`)}</tbody></table>`
      : null}
    <${Pager} pager=${pager} hasNext=${list.data?.riskCases.pageInfo.hasNextPage ?? false} endCursor=${list.data?.riskCases.pageInfo.endCursor ?? null} />
  <//>`;
}
