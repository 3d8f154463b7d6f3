CREATE INDEX `evidence_serial_created` ON `evidence` (`serial`,`created_at`,`evidence_id`);--> statement-breakpoint
CREATE INDEX `sessions_physical_created` ON `sessions` (`physical_id`,`created_at`,`session_id`);--> statement-breakpoint
CREATE INDEX `video_sessions_serial_created` ON `video_sessions` (`serial`,`created_at`,`session_id`);