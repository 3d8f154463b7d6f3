CREATE INDEX `evidence_created` ON `evidence` (`created_at`,`evidence_id`);--> statement-breakpoint
CREATE INDEX `video_sessions_created` ON `video_sessions` (`created_at`,`session_id`);