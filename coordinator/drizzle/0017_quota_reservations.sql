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
	`user_name` text PRIMARY KEY NOT NULL,
	`file_bytes` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
-- Session files already kept count against their owners from the start.
INSERT INTO `quota_users` (`user_name`, `file_bytes`) SELECT `s`.`owner`, sum(`i`.`size`) FROM `session_images` `i` JOIN `sessions` `s` ON `s`.`session_id` = `i`.`session_id` GROUP BY `s`.`owner`;