-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN     "created_by" TEXT,
ADD COLUMN     "rotated_at" TIMESTAMPTZ(3),
ADD COLUMN     "rotated_by" TEXT;

-- AlterTable
ALTER TABLE "approvals" ADD COLUMN     "result_secret" TEXT,
ADD COLUMN     "secret_claimed_at" TIMESTAMPTZ(3);
