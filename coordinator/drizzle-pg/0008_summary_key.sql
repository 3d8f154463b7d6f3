CREATE TABLE "summary_key" (
	"id" integer PRIMARY KEY NOT NULL,
	"key" "bytea" NOT NULL,
	"rotated_at" bigint NOT NULL
);
