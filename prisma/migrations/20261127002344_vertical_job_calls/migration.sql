-- AlterTable
ALTER TABLE "vertical_jobs" ADD COLUMN     "call_started_at" TIMESTAMPTZ(3),
ADD COLUMN     "request_id" TEXT;
