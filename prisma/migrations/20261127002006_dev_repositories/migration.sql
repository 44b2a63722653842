-- AlterTable
ALTER TABLE "rag_chunks" ADD COLUMN     "repository_id" TEXT;

-- AlterTable
ALTER TABLE "rag_documents" ADD COLUMN     "repository_id" TEXT;

-- CreateTable
CREATE TABLE "dev_repositories" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "git_host" TEXT NOT NULL,
    "comments_allowed" BOOLEAN NOT NULL,
    "default_branch" TEXT NOT NULL,
    "metadata" JSONB NOT NULL DEFAULT '{}',
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "dev_repositories_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "dev_repository_files" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "repository_id" TEXT NOT NULL,
    "path" TEXT NOT NULL,
    "document_id" TEXT NOT NULL,
    "bytes" INTEGER NOT NULL,
    "sha256" TEXT NOT NULL,
    "content" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "dev_repository_files_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "dev_tasks" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "kind" TEXT NOT NULL,
    "repository_id" TEXT,
    "title" TEXT,
    "description" TEXT,
    "diff" TEXT,
    "diff_bytes" INTEGER,
    "path" TEXT,
    "framework" TEXT,
    "instructions" TEXT,
    "post_comments" BOOLEAN NOT NULL DEFAULT false,
    "status" TEXT NOT NULL DEFAULT 'queued',
    "result" JSONB,
    "error" JSONB,
    "job_id" TEXT NOT NULL,
    "created_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "completed_at" TIMESTAMPTZ(3),

    CONSTRAINT "dev_tasks_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "dev_repositories_project_id_id_idx" ON "dev_repositories"("project_id", "id");

-- CreateIndex
CREATE INDEX "dev_repository_files_project_id_repository_id_id_idx" ON "dev_repository_files"("project_id", "repository_id", "id");

-- CreateIndex
CREATE UNIQUE INDEX "dev_repository_files_repository_id_path_key" ON "dev_repository_files"("repository_id", "path");

-- CreateIndex
CREATE INDEX "dev_tasks_project_id_kind_id_idx" ON "dev_tasks"("project_id", "kind", "id");

-- CreateIndex
CREATE INDEX "dev_tasks_project_id_repository_id_kind_id_idx" ON "dev_tasks"("project_id", "repository_id", "kind", "id");

-- CreateIndex
CREATE INDEX "rag_documents_repository_id_status_idx" ON "rag_documents"("repository_id", "status");
