-- CreateTable
CREATE TABLE "eval_runs" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "key_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "model" TEXT,
    "template" JSONB,
    "concurrency" INTEGER NOT NULL,
    "status" TEXT NOT NULL,
    "error" JSONB,
    "total" INTEGER NOT NULL,
    "passed" INTEGER NOT NULL DEFAULT 0,
    "failed" INTEGER NOT NULL DEFAULT 0,
    "errored" INTEGER NOT NULL DEFAULT 0,
    "cost_micros" BIGINT NOT NULL DEFAULT 0,
    "latency_p50_ms" INTEGER,
    "lease_owner" TEXT,
    "lease_until" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "started_at" TIMESTAMPTZ(3),
    "completed_at" TIMESTAMPTZ(3),

    CONSTRAINT "eval_runs_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "eval_cases" (
    "id" TEXT NOT NULL,
    "run_id" TEXT NOT NULL,
    "index" INTEGER NOT NULL,
    "case_id" TEXT NOT NULL,
    "input" JSONB NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "output" TEXT,
    "reason" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "request_id" TEXT,
    "attempt_started_at" TIMESTAMPTZ(3),
    "prompt_tokens" INTEGER NOT NULL DEFAULT 0,
    "completion_tokens" INTEGER NOT NULL DEFAULT 0,
    "cost_micros" BIGINT NOT NULL DEFAULT 0,
    "latency_ms" INTEGER,
    "finished_at" TIMESTAMPTZ(3),

    CONSTRAINT "eval_cases_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "eval_runs_project_id_id_idx" ON "eval_runs"("project_id", "id");

-- CreateIndex
CREATE INDEX "eval_runs_status_lease_until_idx" ON "eval_runs"("status", "lease_until");

-- CreateIndex
CREATE INDEX "eval_cases_run_id_id_idx" ON "eval_cases"("run_id", "id");

-- CreateIndex
CREATE UNIQUE INDEX "eval_cases_run_id_index_key" ON "eval_cases"("run_id", "index");

-- AddForeignKey
ALTER TABLE "eval_runs" ADD CONSTRAINT "eval_runs_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "eval_cases" ADD CONSTRAINT "eval_cases_run_id_fkey" FOREIGN KEY ("run_id") REFERENCES "eval_runs"("id") ON DELETE CASCADE ON UPDATE CASCADE;
