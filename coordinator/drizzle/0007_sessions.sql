CREATE TABLE `sessions` (
	`session_id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`physical_id` text NOT NULL,
	`serial` text NOT NULL,
	`agent_id` text NOT NULL,
	`lease_id` text NOT NULL,
	`owner` text NOT NULL,
	`status` text NOT NULL,
	`created_at` integer NOT NULL,
	`ended_at` integer,
	`step_count` integer DEFAULT 0 NOT NULL,
	`context` text NOT NULL,
	`ocr` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `sessions_created` ON `sessions` (`created_at`,`session_id`);--> statement-breakpoint
CREATE INDEX `sessions_lease` ON `sessions` (`lease_id`);