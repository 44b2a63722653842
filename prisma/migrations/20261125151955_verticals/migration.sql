-- CreateTable
CREATE TABLE "vertical_jobs" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "subject_id" TEXT NOT NULL,
    "key_id" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'queued',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "run_after" TIMESTAMPTZ(3) NOT NULL,
    "lease_until" TIMESTAMPTZ(3),
    "input" JSONB NOT NULL,
    "result" JSONB,
    "error" JSONB,
    "inference_ids" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,
    "finished_at" TIMESTAMPTZ(3),

    CONSTRAINT "vertical_jobs_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "risk_cases" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "title" TEXT NOT NULL,
    "description" TEXT,
    "assignee" TEXT NOT NULL,
    "reviewer" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'open',
    "disposition" TEXT,
    "closed_at" TIMESTAMPTZ(3),
    "closed_by" TEXT,
    "metadata" JSONB NOT NULL DEFAULT '{}',
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "risk_cases_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "risk_evidence" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "case_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "content_type" TEXT NOT NULL,
    "content" BYTEA NOT NULL,
    "sha256" TEXT NOT NULL,
    "size" INTEGER NOT NULL,
    "description" TEXT,
    "metadata" JSONB NOT NULL DEFAULT '{}',
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "risk_evidence_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "risk_drafts" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "case_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'queued',
    "instructions" TEXT,
    "content" JSONB,
    "error" JSONB,
    "job_id" TEXT NOT NULL,
    "approval_id" TEXT,
    "approved_by" TEXT,
    "approved_at" TIMESTAMPTZ(3),
    "created_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "completed_at" TIMESTAMPTZ(3),

    CONSTRAINT "risk_drafts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ops_incidents" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "title" TEXT NOT NULL,
    "severity" TEXT NOT NULL,
    "service" TEXT,
    "status" TEXT NOT NULL DEFAULT 'open',
    "resolution" TEXT,
    "opened_at" TIMESTAMPTZ(3) NOT NULL,
    "closed_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "ops_incidents_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ops_timeline_entries" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "incident_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "message" TEXT NOT NULL,
    "actor" TEXT NOT NULL,
    "at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "ops_timeline_entries_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ops_log_entries" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "timestamp" TIMESTAMPTZ(3) NOT NULL,
    "level" TEXT NOT NULL,
    "service" TEXT NOT NULL,
    "message" TEXT NOT NULL,
    "attributes" JSONB NOT NULL DEFAULT '{}',
    "connector_id" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "ops_log_entries_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ops_drafts" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "incident_id" TEXT,
    "params" JSONB NOT NULL DEFAULT '{}',
    "matched" INTEGER NOT NULL DEFAULT 0,
    "status" TEXT NOT NULL DEFAULT 'queued',
    "content" JSONB,
    "error" JSONB,
    "job_id" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "completed_at" TIMESTAMPTZ(3),

    CONSTRAINT "ops_drafts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ops_connectors" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "last_scan_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "ops_connectors_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ops_slos" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "service" TEXT NOT NULL,
    "objective" DOUBLE PRECISION NOT NULL,
    "window_hours" INTEGER NOT NULL,
    "burn_rate_threshold" DOUBLE PRECISION NOT NULL,
    "burning" BOOLEAN NOT NULL DEFAULT false,
    "last_burn_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "ops_slos_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "vertical_jobs_status_run_after_idx" ON "vertical_jobs"("status", "run_after");

-- CreateIndex
CREATE INDEX "vertical_jobs_project_id_subject_id_idx" ON "vertical_jobs"("project_id", "subject_id");

-- CreateIndex
CREATE INDEX "risk_cases_project_id_id_idx" ON "risk_cases"("project_id", "id");

-- CreateIndex
CREATE INDEX "risk_evidence_project_id_case_id_id_idx" ON "risk_evidence"("project_id", "case_id", "id");

-- CreateIndex
CREATE INDEX "risk_drafts_project_id_kind_id_idx" ON "risk_drafts"("project_id", "kind", "id");

-- CreateIndex
CREATE INDEX "risk_drafts_project_id_case_id_id_idx" ON "risk_drafts"("project_id", "case_id", "id");

-- CreateIndex
CREATE INDEX "ops_incidents_project_id_id_idx" ON "ops_incidents"("project_id", "id");

-- CreateIndex
CREATE INDEX "ops_timeline_entries_project_id_incident_id_id_idx" ON "ops_timeline_entries"("project_id", "incident_id", "id");

-- CreateIndex
CREATE INDEX "ops_log_entries_project_id_timestamp_idx" ON "ops_log_entries"("project_id", "timestamp");

-- CreateIndex
CREATE INDEX "ops_log_entries_project_id_service_timestamp_idx" ON "ops_log_entries"("project_id", "service", "timestamp");

-- CreateIndex
CREATE INDEX "ops_drafts_project_id_kind_id_idx" ON "ops_drafts"("project_id", "kind", "id");

-- CreateIndex
CREATE INDEX "ops_connectors_project_id_id_idx" ON "ops_connectors"("project_id", "id");

-- CreateIndex
CREATE INDEX "ops_slos_project_id_id_idx" ON "ops_slos"("project_id", "id");
