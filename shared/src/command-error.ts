import { create } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { CommandErrorSchema, type CommandError } from "./gen/farm/v1/agent_service_pb.js";
import type { ErrorReport } from "./errors.js";

/**
 * An agent's failure as it crosses the control stream: the report (code,
 * field, outcome) plus the status it was raised with, so the coordinator
 * re-raises exactly what the agent raised.
 */
export function toCommandError(report: ErrorReport, err: unknown): CommandError {
  return create(CommandErrorSchema, {
    message: report.message,
    status: ConnectError.from(err).code,
    detail: {
      code: report.code,
      field: report.field ?? "",
      ambiguous: report.ambiguous ?? false,
      ...(report.dispatched === undefined || report.dispatched === null ? {} : { dispatched: report.dispatched }),
      actionId: report.actionId ?? "",
      agentId: report.agentId ?? "",
    },
  });
}
