import { eq } from "drizzle-orm";
import type { AgentDb } from "../db/open-agent-db.js";
import { pins } from "../db/schema.js";

/** Operator pins by adb serial, cached in memory (read on every identity). */
export class PinStore {
  private readonly cache = new Map<string, string>();

  constructor(private readonly db: AgentDb) {
    for (const row of db.select().from(pins).all()) this.cache.set(row.serial, row.label);
  }

  get(serial: string): string {
    return this.cache.get(serial) ?? "";
  }

  set(serial: string, label: string): void {
    if (label === "") {
      this.db.delete(pins).where(eq(pins.serial, serial)).run();
      this.cache.delete(serial);
      return;
    }
    const row = { serial, label, createdAt: Date.now() };
    this.db.insert(pins).values(row).onConflictDoUpdate({ target: pins.serial, set: row }).run();
    this.cache.set(serial, label);
  }
}
