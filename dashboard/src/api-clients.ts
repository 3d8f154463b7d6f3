import { createClient, type Transport } from "@connectrpc/connect";
import { ActivityService } from "@farm/shared/gen/farm/v1/activity_service_pb";
import { BlobService } from "@farm/shared/gen/farm/v1/blob_service_pb";
import { AdbTunnelService } from "@farm/shared/gen/farm/v1/adb_tunnel_service_pb";
import { DeviceService } from "@farm/shared/gen/farm/v1/device_service_pb";
import { EvidenceService } from "@farm/shared/gen/farm/v1/evidence_service_pb";
import { LiveScreenService } from "@farm/shared/gen/farm/v1/live_screen_service_pb";
import { LogcatService } from "@farm/shared/gen/farm/v1/logcat_service_pb";
import { ShellService } from "@farm/shared/gen/farm/v1/shell_service_pb";
import { LeaseService } from "@farm/shared/gen/farm/v1/lease_service_pb";
import { RegistryService } from "@farm/shared/gen/farm/v1/registry_service_pb";
import { SessionService } from "@farm/shared/gen/farm/v1/session_service_pb";
import { VideoService } from "@farm/shared/gen/farm/v1/video_service_pb";
import { WatchService } from "@farm/shared/gen/farm/v1/watch_service_pb";

/** The coordinator's services the dashboard calls, over one transport (the page's, or a test's). */
export function createApi(transport: Transport) {
  return {
    registry: createClient(RegistryService, transport),
    leases: createClient(LeaseService, transport),
    evidence: createClient(EvidenceService, transport),
    video: createClient(VideoService, transport),
    activity: createClient(ActivityService, transport),
    watch: createClient(WatchService, transport),
    sessions: createClient(SessionService, transport),
    tunnels: createClient(AdbTunnelService, transport),
    device: createClient(DeviceService, transport),
    screen: createClient(LiveScreenService, transport),
    logcat: createClient(LogcatService, transport),
    shell: createClient(ShellService, transport),
    blob: createClient(BlobService, transport),
  };
}

export type Api = ReturnType<typeof createApi>;
