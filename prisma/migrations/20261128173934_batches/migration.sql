-- CreateTable
CREATE TABLE "batch_files" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "key_id" TEXT,
    "purpose" TEXT NOT NULL,
    "filename" TEXT NOT NULL,
    "bytes" INTEGER NOT NULL,
    "sealed" TEXT,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "expires_at" TIMESTAMPTZ(3),
    "deleted_at" TIMESTAMPTZ(3),

CONSTRAINT "batch_files_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "batches" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "key_id" TEXT NOT NULL,
    "endpoint" TEXT NOT NULL,
    "input_file_id" TEXT NOT NULL,
    "completion_window" TEXT NOT NULL,
    "metadata" JSONB,
    "status" TEXT NOT NULL,
    "errors" JSONB,
    "total" INTEGER NOT NULL DEFAULT 0,
    "completed" INTEGER NOT NULL DEFAULT 0,
    "failed" INTEGER NOT NULL DEFAULT 0,
    "cost_micros" BIGINT NOT NULL DEFAULT 0,
    "output_file_id" TEXT,
    "error_file_id" TEXT,
    "lease_owner" TEXT,
    "lease_until" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "in_progress_at" TIMESTAMPTZ(3),
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "finalizing_at" TIMESTAMPTZ(3),
    "completed_at" TIMESTAMPTZ(3),
    "failed_at" TIMESTAMPTZ(3),
    "expired_at" TIMESTAMPTZ(3),
    "cancelling_at" TIMESTAMPTZ(3),
    "cancelled_at" TIMESTAMPTZ(3),

CONSTRAINT "batches_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "batch_lines" (
    "id" TEXT NOT NULL,
    "batch_id" TEXT NOT NULL,
    "index" INTEGER NOT NULL,
    "custom_id" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "request_id" TEXT,
    "attempt_started_at" TIMESTAMPTZ(3),
    "result" TEXT,
    "cost_micros" BIGINT NOT NULL DEFAULT 0,

CONSTRAINT "batch_lines_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "batch_files_project_id_id_idx" ON "batch_files"("project_id", "id");

-- CreateIndex
CREATE INDEX "batches_project_id_id_idx" ON "batches"("project_id", "id");

-- CreateIndex
CREATE INDEX "batches_status_lease_until_idx" ON "batches"("status", "lease_until");

-- CreateIndex
CREATE UNIQUE INDEX "batch_lines_batch_id_index_key" ON "batch_lines"("batch_id", "index");

-- AddForeignKey
ALTER TABLE "batch_lines" ADD CONSTRAINT "batch_lines_batch_id_fkey" FOREIGN KEY ("batch_id") REFERENCES "batches"("id") ON DELETE CASCADE ON UPDATE CASCADE;
