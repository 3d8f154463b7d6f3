CREATE INDEX "evidence_serial_created" ON "evidence" USING btree ("serial","created_at","evidence_id");--> statement-breakpoint
CREATE INDEX "sessions_physical_created" ON "sessions" USING btree ("physical_id","created_at","session_id");--> statement-breakpoint
CREATE INDEX "video_sessions_serial_created" ON "video_sessions" USING btree ("serial","created_at","session_id");