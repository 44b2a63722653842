-- CreateTable
CREATE TABLE "batch_file_chunks" (
    "file_id" TEXT NOT NULL,
    "seq" INTEGER NOT NULL,
    "first_index" INTEGER NOT NULL,
    "sealed" TEXT NOT NULL,

CONSTRAINT "batch_file_chunks_pkey" PRIMARY KEY ("file_id","seq")
);

-- CreateIndex
CREATE INDEX "batch_file_chunks_file_id_first_index_idx" ON "batch_file_chunks"("file_id", "first_index");
