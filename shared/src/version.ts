/** Version of the farm release; every binary reports it. */
export const FARM_VERSION = "0.1.0";

/**
 * Version of the agent ↔ coordinator control protocol. The coordinator serves
 * agents whose protocol version lies in [MIN_AGENT_PROTOCOL, PROTOCOL_VERSION].
 */
export const PROTOCOL_VERSION = 2;
export const MIN_AGENT_PROTOCOL = 2;
