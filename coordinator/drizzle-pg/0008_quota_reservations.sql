CREATE TABLE "quota_reservations" (
	"id" text PRIMARY KEY NOT NULL,
	"user_name" text NOT NULL,
	"kind" text NOT NULL,
	"capture" integer NOT NULL,
	"bytes" bigint NOT NULL,
	"expires_at" bigint NOT NULL
);
--> statement-breakpoint
CREATE TABLE "quota_users" (
	"user_name" text PRIMARY KEY NOT NULL
);
--> statement-breakpoint
CREATE INDEX "quota_reservations_user" ON "quota_reservations" USING btree ("user_name","expires_at");--> statement-breakpoint
CREATE INDEX "sessions_owner" ON "sessions" USING btree ("owner");