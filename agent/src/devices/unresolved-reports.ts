import { clone } from "@bufbuild/protobuf";
import { DeviceReportSchema, type DeviceReport } from "@farm/shared/gen/farm/v1/agent_service_pb";
import type { DeviceWatcher } from "./device-watcher.js";

/**
 * Tells the coordinator which actions have an unknown outcome on each phone, from the
 * host journal, so it can refuse changes to that phone through any agent.
 * Changes made by this process are sent at once; those made by other agents
 * sharing the journal are noticed by `refresh` (every heartbeat).
 */
export class UnresolvedReports {
  private readonly sent = new Map<string, string>();
  send: (report: DeviceReport) => void = () => {};

  constructor(
    private readonly watcher: DeviceWatcher,
    private readonly unresolvedIds: (physicalId: string) => string[],
  ) {}

  /** The report with the phone's unresolved action ids filled in. */
  decorate = (report: DeviceReport): DeviceReport => {
    const physicalId = report.properties?.physicalId ?? "";
    if (!physicalId || !report.properties) return report;
    const ids = this.unresolvedIds(physicalId);
    this.sent.set(physicalId, ids.join(","));
    if (ids.length === 0 && report.properties.unresolvedActionIds.length === 0) return report;
    const copy = clone(DeviceReportSchema, report);
    if (copy.properties) copy.properties.unresolvedActionIds = ids;
    return copy;
  };

  /** Re-sends the phone's reports if its unresolved actions differ from what was last sent. */
  changed(physicalId: string): void {
    if (this.sent.get(physicalId) === this.unresolvedIds(physicalId).join(",")) return;
    for (const report of this.watcher.snapshot()) {
      if (report.properties?.physicalId === physicalId) this.send(report);
    }
  }

  /** Checks every known phone (another agent of the host may have changed the journal). */
  refresh(): void {
    const ids = new Set(this.watcher.snapshot().map((r) => r.properties?.physicalId ?? "").filter((p) => p !== ""));
    for (const physicalId of ids) this.changed(physicalId);
  }
}
