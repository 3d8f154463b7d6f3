CREATE TABLE `session_images` (
	`session_id` text NOT NULL,
	`sha256` text NOT NULL,
	`size` integer NOT NULL,
	`width` integer NOT NULL,
	`height` integer NOT NULL,
	PRIMARY KEY(`session_id`, `sha256`)
);
--> statement-breakpoint
CREATE TABLE `session_steps` (
	`session_id` text NOT NULL,
	`sequence` integer NOT NULL,
	`record` text NOT NULL,
	`ocr` text,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`session_id`, `sequence`)
);
--> statement-breakpoint
ALTER TABLE `sessions` ADD `failed_step_count` integer DEFAULT 0 NOT NULL;