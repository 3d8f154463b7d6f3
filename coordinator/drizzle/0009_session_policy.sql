ALTER TABLE `session_images` ADD `mime_type` text DEFAULT 'image/png' NOT NULL;--> statement-breakpoint
ALTER TABLE `sessions` ADD `policy_json` text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE `sessions` ADD `policy_sha256` text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE `sessions` ADD `secret_names` text DEFAULT '[]' NOT NULL;