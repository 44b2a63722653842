-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN     "mcp_tools" TEXT[] DEFAULT ARRAY[]::TEXT[];

-- CreateTable
CREATE TABLE "mcp_servers" (
    "id" TEXT NOT NULL,
    "project_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "url" TEXT NOT NULL,
    "headers_sealed" TEXT,
    "header_names" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "tools_allowed" JSONB,
    "price_micros" BIGINT NOT NULL DEFAULT 0,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

CONSTRAINT "mcp_servers_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "mcp_servers_project_id_id_idx" ON "mcp_servers"("project_id", "id");

-- CreateIndex
CREATE UNIQUE INDEX "mcp_servers_project_id_name_key" ON "mcp_servers"("project_id", "name");

-- AddForeignKey
ALTER TABLE "mcp_servers" ADD CONSTRAINT "mcp_servers_project_id_fkey" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
