import { ServiceRegistry } from './service-registry.js';
import { shellService } from './shell-service.js';

/** The services every simulated device offers; unknown ones are refused. */
export function defaultServices(): ServiceRegistry {
  return new ServiceRegistry([shellService]);
}
