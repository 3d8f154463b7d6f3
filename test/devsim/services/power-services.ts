import type { Service } from "./service.js";

/** `reboot:[TARGET]`: the stream closes, then the transport drops and the phone boots with a new boot id. */
export const rebootService: Service = {
  prefixes: ["reboot:"],
  open(request) {
    return async (stream) => {
      stream.end();
      // Let the CLSE go out before the connection drops.
      setTimeout(() => request.device.state.hooks.reboot(), 20);
    };
  },
};

/** `root:` with adbd's exact words; on a debuggable build adbd restarts as root (the TCP connection drops). */
export const rootService: Service = {
  prefixes: ["root:"],
  open(request) {
    const state = request.device.state;
    return async (stream) => {
      if (state.adbdRoot) return stream.write("adbd is already running as root\n");
      if (state.props.get("ro.debuggable") !== "1") return stream.write("adbd cannot run as root in production builds\n");
      await stream.write("restarting adbd as root\n");
      stream.end();
      setTimeout(() => {
        state.adbdRoot = true;
        state.hooks.restartAdbd();
      }, 20);
    };
  },
};

/** `unroot:`: the reverse of root:. */
export const unrootService: Service = {
  prefixes: ["unroot:"],
  open(request) {
    const state = request.device.state;
    return async (stream) => {
      if (!state.adbdRoot) return stream.write("adbd not running as root\n");
      await stream.write("restarting adbd as non root\n");
      stream.end();
      setTimeout(() => {
        state.adbdRoot = false;
        state.hooks.restartAdbd();
      }, 20);
    };
  },
};
