CREATE TABLE `blobs` (
	`id` text PRIMARY KEY NOT NULL,
	`owner` text NOT NULL,
	`size` integer NOT NULL,
	`sha256` text NOT NULL,
	`name` text NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `blobs_owner` ON `blobs` (`owner`);--> statement-breakpoint
CREATE INDEX `blobs_created` ON `blobs` (`created_at`);--> statement-breakpoint
CREATE TABLE `stored_chunks` (
	`key` text NOT NULL,
	`seq` integer NOT NULL,
	`data` blob NOT NULL,
	PRIMARY KEY(`key`, `seq`)
);
--> statement-breakpoint
CREATE TABLE `stored_files` (
	`key` text PRIMARY KEY NOT NULL,
	`size` integer NOT NULL,
	`sha256` text NOT NULL,
	`created_at` integer NOT NULL
);
