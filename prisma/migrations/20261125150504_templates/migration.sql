-- AlterTable
ALTER TABLE "usage_records" ADD COLUMN     "template_id" TEXT,
ADD COLUMN     "template_version" INTEGER;

-- CreateTable
CREATE TABLE "templates" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT,
    "latest_version" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "templates_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "template_versions" (
    "template_id" TEXT NOT NULL,
    "version" INTEGER NOT NULL,
    "messages" JSONB NOT NULL,
    "variables" JSONB NOT NULL,
    "model" TEXT,
    "params" JSONB,
    "created_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "template_versions_pkey" PRIMARY KEY ("template_id","version")
);

-- CreateIndex
CREATE INDEX "templates_project_id_id_idx" ON "templates"("project_id", "id");

-- CreateIndex
CREATE UNIQUE INDEX "templates_project_id_name_key" ON "templates"("project_id", "name");

-- AddForeignKey
ALTER TABLE "templates" ADD CONSTRAINT "templates_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "template_versions" ADD CONSTRAINT "template_versions_template_id_fkey" FOREIGN KEY ("template_id") REFERENCES "templates"("id") ON DELETE CASCADE ON UPDATE CASCADE;
