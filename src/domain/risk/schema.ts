import { Type, type Static } from 'typebox';
import { says } from '../../config/schema-errors.ts';
import { pageQueryProperties } from '../pagination.ts';
import { Input, PathId, ProjectIdField, ProjectIdFilter } from '../schema.ts';
import { Instructions, Metadata, Text } from '../verticals/schema.ts';

export const DISPOSITIONS = ['mitigated', 'accepted', 'transferred', 'avoided', 'no_issue'] as const;
export const CASE_STATUSES = ['open', 'closed'] as const;
/** Evidence bytes: at most 5 MB (as base64 in JSON). */
export const MAX_EVIDENCE_BYTES = 5 * 1024 * 1024;

/**
 * A person of a case: checked and compared by the service as key names are (domain/validation.ts): no invisible or
 * text-direction characters, no mix of Latin, Cyrillic and Greek letters (400); NFKC and case-folded for equality.
 */
const Person = (description: string) =>
  Text(200, `${description} Compared ignoring case and compatibility forms; invisible characters and mixed Latin/Cyrillic/Greek letters are refused.`);

/** POST /v1/risk/cases, GraphQL createRiskCase. */
export const CreateRiskCase = Input({
  project_id: ProjectIdField,
  title: Text(200, 'What the case is about.'),
  description: Type.Optional(Text(10_000, 'The case in more words.')),
  assignee: Person('Who works the case (a person or key id of yours).'),
  reviewer: Person('Who reviews it: never the assignee (409 segregation_of_duties).'),
  metadata: Type.Optional(Metadata),
});
export type CreateRiskCase = Static<typeof CreateRiskCase>;

/** PATCH /v1/risk/cases/{case_id}, GraphQL updateRiskCase. */
export const UpdateRiskCase = Input({
  project_id: ProjectIdField,
  title: Type.Optional(Text(200, 'What the case is about.')),
  description: Type.Optional(Text(10_000, 'The case in more words.')),
  assignee: Type.Optional(Person('Who works the case.')),
  reviewer: Type.Optional(Person('Who reviews it: never the assignee (409 segregation_of_duties).')),
  metadata: Type.Optional(Metadata),
});
export type UpdateRiskCase = Static<typeof UpdateRiskCase>;

/** POST /v1/risk/cases/{case_id}/close, GraphQL closeRiskCase. */
export const CloseRiskCase = Input({
  project_id: ProjectIdField,
  disposition: Type.Enum(DISPOSITIONS, { description: `How the case ended: ${DISPOSITIONS.join(', ')}.`, ...says(`must be one of ${DISPOSITIONS.join(', ')}`) }),
  note: Type.Optional(Text(4000, 'Why.')),
});
export type CloseRiskCase = Static<typeof CloseRiskCase>;

export const ListRiskCasesQuery = Input({
  ...pageQueryProperties(),
  project_id: ProjectIdFilter,
  status: Type.Optional(Type.Enum(CASE_STATUSES, { description: 'Only cases in this status.', ...says('must be open or closed') })),
});
export type ListRiskCasesQuery = Static<typeof ListRiskCasesQuery>;

/** POST /v1/risk/cases/{case_id}/evidence, GraphQL addRiskEvidence: the bytes as base64, fixed from then on. */
export const CreateEvidence = Input({
  project_id: ProjectIdField,
  name: Text(200, 'A file name or title.'),
  content_type: Type.Optional(
    Type.String({
      maxLength: 200,
      pattern: '^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+( *;[ -~]*)?$',
      description: 'The media type of the bytes (default application/octet-stream).',
      ...says('must be a media type such as text/plain'),
    }),
  ),
  content_base64: Type.String({
    minLength: 1,
    maxLength: Math.ceil(MAX_EVIDENCE_BYTES / 3) * 4,
    pattern: '^[A-Za-z0-9+/]+={0,2}$',
    description: 'The bytes, base64-encoded (at most 5 MB). Fixed at upload: their SHA-256 is kept and shown.',
    ...says('must be base64 of at most 5 MB'),
  }),
  description: Type.Optional(Text(4000, 'What the evidence shows.')),
  metadata: Type.Optional(Metadata),
});
export type CreateEvidence = Static<typeof CreateEvidence>;

/**
 * PATCH /v1/risk/evidence/{evidence_id}, GraphQL updateRiskEvidence: metadata only. `content_base64` is accepted as a
 * field only to be refused with 409 evidence_immutable (the bytes are fixed at upload).
 */
export const UpdateEvidence = Input({
  project_id: ProjectIdField,
  name: Type.Optional(Text(200, 'A file name or title.')),
  description: Type.Optional(Text(4000, 'What the evidence shows.')),
  metadata: Type.Optional(Metadata),
  content_base64: Type.Optional(Type.String({ description: 'Refused: evidence bytes cannot change (409 evidence_immutable).' })),
  content_type: Type.Optional(Type.String({ description: 'Refused with the bytes: 409 evidence_immutable.' })),
});
export type UpdateEvidence = Static<typeof UpdateEvidence>;

export const ListEvidenceQuery = Input({ ...pageQueryProperties(), project_id: ProjectIdFilter });

/** POST /v1/risk/cases/{case_id}/assessments and …/reports: model-drafted, asynchronous. */
export const DraftRequest = Input({ project_id: ProjectIdField, instructions: Instructions });
export type DraftRequest = Static<typeof DraftRequest>;

export const ListDraftsQuery = Input({
  ...pageQueryProperties(),
  project_id: ProjectIdFilter,
  case_id: Type.Optional(Type.String({ description: 'Only those of this case (cas_…).' })),
});
export type ListDraftsQuery = Static<typeof ListDraftsQuery>;

export const CaseIdParams = PathId('case_id', "The case's id (cas_…).");
export const EvidenceIdParams = PathId('evidence_id', "The evidence's id (evi_…).");
export const AssessmentIdParams = PathId('assessment_id', "The assessment's id (rsa_…).");
export const ReportIdParams = PathId('report_id', "The report's id (rpt_…).");
export const ProjectOnly = Input({ project_id: ProjectIdField });
