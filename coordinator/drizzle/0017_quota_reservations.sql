CREATE TABLE `quota_reservations` (
	`id` text PRIMARY KEY NOT NULL,
	`user_name` text NOT NULL,
	`kind` text NOT NULL,
	`capture` integer NOT NULL,
	`bytes` integer NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `quota_reservations_user` ON `quota_reservations` (`user_name`,`expires_at`);--> statement-breakpoint
CREATE TABLE `quota_users` (
	`user_name` text PRIMARY KEY NOT NULL
);
--> statement-breakpoint
CREATE INDEX `sessions_owner` ON `sessions` (`owner`);