/**
 * A stock @grpc/grpc-js client (no Connect code) talks to a real coordinator
 * process, sharing only the protobuf-es message types for (de)serialization.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { AgentService, AttachRequestSchema, AttachResponseSchema, type AttachRequest } from "@farm/shared/gen/farm/v1/agent_service_pb";
import { ListDevicesRequestSchema, ListDevicesResponseSchema, RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { HealthCheckRequestSchema, HealthCheckResponseSchema, HealthCheckResponse_ServingStatus } from "@farm/shared/gen/grpc/health/v1/health_pb";
import { PROTOCOL_VERSION } from "@farm/shared/version";
import { farm, startFarm, waitFor, type FarmProcess } from "../support/farm-process.js";
import { makeTempDir, type TempDir } from "../support/temp-dir.js";

let dir: TempDir;
let coordinator: FarmProcess;
let client: grpc.Client;
let admin: string;

const ser = <D extends DescMessage>(schema: D) => (m: MessageShape<D>) => Buffer.from(toBinary(schema, m));
const de = <D extends DescMessage>(schema: D) => (b: Buffer) => fromBinary(schema, b);

function bearer(token: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${token}`);
  return md;
}

function unary<Req extends DescMessage, Res extends DescMessage>(
  path: string,
  reqSchema: Req,
  resSchema: Res,
  req: MessageShape<Req>,
  md: grpc.Metadata,
): Promise<MessageShape<Res>> {
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(path, ser(reqSchema), de(resSchema), req, md, { deadline: Date.now() + 10_000 }, (err, res) => err || !res ? reject(err ?? new Error("empty response")) : resolve(res));
  });
}

beforeAll(async () => {
  dir = await makeTempDir("interop");
  coordinator = await startFarm(["coordinator", "--listen", "127.0.0.1:0", "--data-dir", join(dir.path, "data")]);
  admin = (await readFile(coordinator.ready["adminTokenFile"] as string, "utf8")).trim();
  client = new grpc.Client(new URL(coordinator.ready["url"] as string).host, grpc.credentials.createInsecure());
});

afterAll(async () => {
  client?.close();
  await coordinator?.stop();
  await dir?.remove();
});

describe("stock gRPC client", () => {
  it("checks health without credentials", async () => {
    const res = await unary("/grpc.health.v1.Health/Check", HealthCheckRequestSchema, HealthCheckResponseSchema, create(HealthCheckRequestSchema), new grpc.Metadata());
    expect(res.status).toBe(HealthCheckResponse_ServingStatus.SERVING);
  });

  it("is refused without a token, with the farm error code in the status details", async () => {
    const err = await unary(
      `/${RegistryService.typeName}/ListDevices`,
      ListDevicesRequestSchema,
      ListDevicesResponseSchema,
      create(ListDevicesRequestSchema),
      new grpc.Metadata(),
    ).then(() => null, (e: grpc.ServiceError) => e);
    expect(err?.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(err?.metadata.get("grpc-status-details-bin")).toHaveLength(1);
  });

  it("attaches as an agent over a bidi stream and lists the devices it reported", async () => {
    const env = { FARM_COORDINATOR: coordinator.ready["url"] as string, FARM_TOKEN: admin, FARM_HOME: join(dir.path, "home"), FARM_CONFIG: join(dir.path, "none.json") };
    const created = await farm(["token", "create", "--kind", "agent", "--name", "grpc-js-agent"], env);
    const stream = client.makeBidiStreamRequest(
      `/${AgentService.typeName}/Attach`,
      ser(AttachRequestSchema),
      de(AttachResponseSchema),
      bearer(String(created.json["token"])),
    );
    const first = new Promise((resolve, reject) => {
      stream.once("data", resolve);
      stream.once("error", reject);
    });
    const send = (m: AttachRequest) => stream.write(m);
    send(
      create(AttachRequestSchema, {
        kind: { case: "hello", value: { agentId: "grpc-js", name: "grpc-js", hostname: "h", protocolVersion: PROTOCOL_VERSION, agentVersion: "x", heartbeatIntervalMs: 1000 } },
      }),
    );
    expect(await first).toMatchObject({ kind: { case: "helloAccepted" } });
    send(create(AttachRequestSchema, { kind: { case: "inventory", value: { devices: [{ serial: "emulator-5554", state: "device", properties: { model: "sdk_gphone64", physicalId: "pd-grpc-js", identityStatus: "ok" } }] } } }));

    const devices = await waitFor("the reported device", async () => {
      const res = await unary(`/${RegistryService.typeName}/ListDevices`, ListDevicesRequestSchema, ListDevicesResponseSchema, create(ListDevicesRequestSchema), bearer(admin));
      return res.devices.length === 1 ? res.devices : undefined;
    });
    expect(devices[0]).toMatchObject({ serial: "emulator-5554", state: "device", agentName: "grpc-js", properties: { model: "sdk_gphone64" } });
    stream.end();
    stream.cancel();
  });
});
