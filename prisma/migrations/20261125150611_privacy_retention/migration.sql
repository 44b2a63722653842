-- CreateTable
CREATE TABLE "project_privacy" (
    "project_id" TEXT NOT NULL,
    "pii_redact" BOOLEAN NOT NULL DEFAULT false,
    "pii_updated_at" TIMESTAMPTZ(3),
    "retention_mode" TEXT NOT NULL DEFAULT 'standard',
    "retention_days" INTEGER NOT NULL DEFAULT 30,
    "retention_updated_at" TIMESTAMPTZ(3),

    CONSTRAINT "project_privacy_pkey" PRIMARY KEY ("project_id")
);

-- CreateTable
CREATE TABLE "retained_inferences" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "request_id" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "sealed" TEXT,
    "retained_until" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "retained_inferences_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "retained_inferences_retained_until_idx" ON "retained_inferences"("retained_until");

-- AddForeignKey
ALTER TABLE "project_privacy" ADD CONSTRAINT "project_privacy_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
