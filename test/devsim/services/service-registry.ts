import type { Service } from "./service.js";

/** Services by name prefix; the longest matching prefix wins. */
export class ServiceRegistry {
  private readonly byPrefix = new Map<string, Service>();

  constructor(services: Iterable<Service> = []) {
    for (const service of services) this.register(service);
  }

  register(service: Service): this {
    for (const prefix of service.prefixes) this.byPrefix.set(prefix, service);
    return this;
  }

  resolve(name: string): Service | undefined {
    let best: { prefix: string; service: Service } | undefined;
    for (const [prefix, service] of this.byPrefix) {
      if (name.startsWith(prefix) && (!best || prefix.length > best.prefix.length)) best = { prefix, service };
    }
    return best?.service;
  }

  get prefixes(): string[] {
    return [...this.byPrefix.keys()].sort();
  }
}
