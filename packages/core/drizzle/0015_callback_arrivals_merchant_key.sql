-- callback_arrivals is keyed by (job_id, merchant_no), not job_id alone: job ids (`payin-{OrderNo}-{state}`) are unique
-- within one merchant's queue only, and the platform may reuse an OrderNo across merchants. Nothing runs here, inside
-- drizzle's transaction: the merchant keys step of `pnpm db:migrate` (packages/core/src/db/merchant-keys.ts) builds the
-- unique index "callback_arrivals_merchant_job_pk" CONCURRENTLY beside the old primary key on job_id, which the
-- previous release's ON CONFLICT (job_id) needs during the rollout; `pnpm db:migrate --finish-merchants` then drops the
-- old primary key and makes that index the table's primary key (ADD CONSTRAINT ... PRIMARY KEY USING INDEX), which is
-- what schema.ts and this migration's snapshot describe.
SELECT 1;
