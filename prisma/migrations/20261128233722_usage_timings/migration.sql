-- The request detail's trace id and phase timings (src/domain/usage/timings.ts). usage_records is partitioned by
-- month (the partitions migration): ADD COLUMN on the parent adds the column to every partition, the DEFAULT one
-- included, and partitions made later by the upkeep job (CREATE TABLE … PARTITION OF) take it too. Nullable without
-- a default: a catalog change only, no row is rewritten; records written before read null.

-- AlterTable
ALTER TABLE "usage_records" ADD COLUMN     "timings" JSONB,
ADD COLUMN     "trace_id" TEXT;
