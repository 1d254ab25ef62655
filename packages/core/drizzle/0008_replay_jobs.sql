CREATE TABLE "replay_jobs" (
	"replay_id" bigint NOT NULL,
	"job_id" text NOT NULL,
	"sent_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "replay_jobs_replay_id_job_id_pk" PRIMARY KEY("replay_id","job_id")
);
--> statement-breakpoint
ALTER TABLE "replay_jobs" ADD CONSTRAINT "replay_jobs_replay_id_replays_id_fk" FOREIGN KEY ("replay_id") REFERENCES "public"."replays"("id") ON DELETE no action ON UPDATE no action;
--> statement-breakpoint
-- The apps' role (migration 0007): the console records and reads the jobs a replay sent back; nothing updates them.
GRANT SELECT, INSERT ON "replay_jobs" TO mcb_app;
