import { execService } from "./exec-service.js";
import { framebufferService } from "./framebuffer-service.js";
import { rebootService, rootService, unrootService } from "./power-services.js";
import { ServiceRegistry } from "./service-registry.js";
import { socketService } from "./socket-service.js";
import { shellService } from "./shell-service.js";
import { syncService } from "./sync-service.js";

/** The services every simulated device offers; unknown ones are refused. */
export function defaultServices(): ServiceRegistry {
  return new ServiceRegistry([shellService, execService, syncService, framebufferService, socketService, rebootService, rootService, unrootService]);
}
