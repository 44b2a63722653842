-- AlterTable
ALTER TABLE "usage_records" ADD COLUMN     "customer" TEXT;

-- CreateTable
CREATE TABLE "customers" (
    "project_id" TEXT NOT NULL,
    "customer" TEXT NOT NULL,
    "budget_micros" BIGINT,
    "hard_stop" BOOLEAN NOT NULL DEFAULT true,
    "budget_updated_at" TIMESTAMPTZ(3),
    "requests_per_minute" INTEGER,
    "tokens_per_minute" INTEGER,
    "rate_limits_updated_at" TIMESTAMPTZ(3),
    "created_at" TIMESTAMPTZ(3) NOT NULL,

CONSTRAINT "customers_pkey" PRIMARY KEY ("project_id","customer")
);

-- CreateIndex
CREATE INDEX "customers_project_id_created_at_idx" ON "customers"("project_id", "created_at");

-- CreateIndex
CREATE INDEX "usage_records_project_id_customer_request_id_idx" ON "usage_records"("project_id", "customer", "request_id");
