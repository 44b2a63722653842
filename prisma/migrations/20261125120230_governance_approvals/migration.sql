-- AlterTable
ALTER TABLE "projects" ADD COLUMN     "dual_control" TEXT[] DEFAULT ARRAY[]::TEXT[],
ADD COLUMN     "governance_updated_at" TIMESTAMPTZ(3);

-- CreateTable
CREATE TABLE "approvals" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "action" TEXT NOT NULL,
    "resource" TEXT NOT NULL,
    "args" JSONB NOT NULL,
    "request" JSONB NOT NULL,
    "before" JSONB,
    "requested_by" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "decided_by" TEXT,
    "decided_at" TIMESTAMPTZ(3),
    "reason" TEXT,
    "error" JSONB,
    "result_id" TEXT,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "approvals_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "approvals_project_id_id_idx" ON "approvals"("project_id", "id");

-- CreateIndex
CREATE INDEX "approvals_project_id_status_id_idx" ON "approvals"("project_id", "status", "id");

-- CreateIndex
CREATE INDEX "approvals_status_expires_at_idx" ON "approvals"("status", "expires_at");

-- AddForeignKey
ALTER TABLE "approvals" ADD CONSTRAINT "approvals_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
