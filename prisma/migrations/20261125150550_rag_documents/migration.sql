-- CreateTable
CREATE TABLE "rag_documents" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "bytes" INTEGER NOT NULL,
    "content_type" TEXT NOT NULL,
    "chunks" INTEGER NOT NULL DEFAULT 0,
    "status" TEXT NOT NULL DEFAULT 'processing',
    "error" TEXT,
    "metadata" JSONB NOT NULL DEFAULT '{}',
    "content_sealed" TEXT,
    "created_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "lease_until" TIMESTAMPTZ(3),
    "next_attempt_at" TIMESTAMPTZ(3) NOT NULL,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "indexed_at" TIMESTAMPTZ(3),

    CONSTRAINT "rag_documents_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "rag_chunks" (
    "id" TEXT NOT NULL,
    "document_id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "ordinal" INTEGER NOT NULL,
    "text" TEXT NOT NULL,
    "tsv" tsvector,
    "embedding" BYTEA,
    "dims" INTEGER,

    CONSTRAINT "rag_chunks_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "rag_settings" (
    "project_id" TEXT NOT NULL,
    "embedding_model" TEXT,
    "version" INTEGER NOT NULL DEFAULT 0,
    "updated_at" TIMESTAMPTZ(3),

    CONSTRAINT "rag_settings_pkey" PRIMARY KEY ("project_id")
);

-- CreateIndex
CREATE INDEX "rag_documents_project_id_id_idx" ON "rag_documents"("project_id", "id");

-- CreateIndex
CREATE INDEX "rag_documents_status_next_attempt_at_idx" ON "rag_documents"("status", "next_attempt_at");

-- CreateIndex
CREATE INDEX "rag_chunks_project_id_document_id_idx" ON "rag_chunks"("project_id", "document_id");

-- CreateIndex
CREATE INDEX "rag_chunks_tsv_idx" ON "rag_chunks" USING GIN ("tsv");

-- AddForeignKey
ALTER TABLE "rag_documents" ADD CONSTRAINT "rag_documents_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "rag_chunks" ADD CONSTRAINT "rag_chunks_document_id_fkey" FOREIGN KEY ("document_id") REFERENCES "rag_documents"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "rag_settings" ADD CONSTRAINT "rag_settings_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
