CREATE TABLE `video_sessions` (
	`session_id` text PRIMARY KEY NOT NULL,
	`agent_id` text NOT NULL,
	`serial` text NOT NULL,
	`physical_id` text NOT NULL,
	`requested_by` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	`status` text NOT NULL,
	`code` text NOT NULL,
	`message` text NOT NULL,
	`worker_available` integer NOT NULL,
	`recovery_state` text NOT NULL,
	`manifest_json` text NOT NULL
);
