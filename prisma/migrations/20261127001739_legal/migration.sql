-- CreateTable
CREATE TABLE "legal_matters" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "client" TEXT,
    "description" TEXT,
    "status" TEXT NOT NULL DEFAULT 'open',
    "closed_at" TIMESTAMPTZ(3),
    "closed_by" TEXT,
    "close_reason" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "legal_matters_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "legal_contracts" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "matter_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "content_type" TEXT NOT NULL,
    "bytes" INTEGER NOT NULL,
    "text" TEXT NOT NULL,
    "characters" INTEGER NOT NULL,
    "sha256" TEXT NOT NULL,
    "created_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "legal_contracts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "legal_drafts" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "matter_id" TEXT NOT NULL,
    "contract_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'queued',
    "params" JSONB NOT NULL DEFAULT '{}',
    "result" JSONB,
    "diff" TEXT,
    "error" JSONB,
    "job_id" TEXT NOT NULL,
    "created_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "completed_at" TIMESTAMPTZ(3),

    CONSTRAINT "legal_drafts_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "legal_matters_project_id_id_idx" ON "legal_matters"("project_id", "id");

-- CreateIndex
CREATE INDEX "legal_contracts_project_id_matter_id_id_idx" ON "legal_contracts"("project_id", "matter_id", "id");

-- CreateIndex
CREATE INDEX "legal_drafts_project_id_contract_id_kind_id_idx" ON "legal_drafts"("project_id", "contract_id", "kind", "id");
