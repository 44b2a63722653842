-- AlterTable
ALTER TABLE "api_keys" ADD COLUMN     "models" TEXT[] DEFAULT ARRAY[]::TEXT[];
