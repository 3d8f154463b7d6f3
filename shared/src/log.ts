export type LogLevel = "debug" | "info" | "warn" | "error";

export type LogFields = Record<string, unknown>;

export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
}

const order: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

// Field names whose values are secrets; they are never written out.
const secretKey = /token|secret|password|authorization|cookie/i;

/** Replaces secret-looking fields so a token can never reach a log line. */
export function redact(fields: LogFields): LogFields {
  const out: LogFields = {};
  for (const [k, v] of Object.entries(fields)) {
    if (secretKey.test(k)) out[k] = "[redacted]";
    else if (v instanceof Error) out[k] = v.message;
    else out[k] = v;
  }
  return out;
}

/** JSON-lines logger on stderr (journald and log shippers read it as is). */
export function createLogger(
  opts: { level?: LogLevel; base?: LogFields; write?: (line: string) => void; env?: NodeJS.ProcessEnv } = {},
): Logger {
  const min = order[opts.level ?? levelFromEnv(opts.env ?? process.env)];
  const base = opts.base ?? {};
  const write = opts.write ?? ((line: string) => process.stderr.write(line + "\n"));
  const emit = (level: LogLevel, msg: string, fields?: LogFields) => {
    if (order[level] < min) return;
    write(
      JSON.stringify({
        time: new Date().toISOString(),
        level,
        msg,
        ...redact({ ...base, ...fields }),
      }),
    );
  };
  return {
    debug: (m, f) => emit("debug", m, f),
    info: (m, f) => emit("info", m, f),
    warn: (m, f) => emit("warn", m, f),
    error: (m, f) => emit("error", m, f),
    child: (fields) => createLogger({ ...opts, base: { ...base, ...fields } }),
  };
}

/** FARM_LOG_LEVEL from the given environment (a caller that runs in process passes its own). */
function levelFromEnv(env: NodeJS.ProcessEnv): LogLevel {
  const v = env["FARM_LOG_LEVEL"];
  return v === "debug" || v === "warn" || v === "error" ? v : "info";
}
