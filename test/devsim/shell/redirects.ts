import type { DeviceState } from '../device/device-state.js';
import type { Redirect } from './ast.js';
import { NULL_SINK, inputFrom, type InputSource, type OutputSink } from './io.js';

/** The file descriptors a command runs with. */
export interface ShellIO {
  stdin: InputSource;
  stdout: OutputSink;
  stderr: OutputSink;
}

/** A redirection that cannot be carried out; the command does not run. */
export class RedirectError extends Error {
  override name = 'RedirectError';
}

/**
 * Applies redirections left to right, as sh does, so `>/dev/null 2>&1`
 * silences both streams while `2>&1 >/dev/null` keeps stderr on stdout.
 */
export function applyRedirects(
  redirects: readonly Redirect[],
  io: ShellIO,
  expand: (redirect: Redirect) => string,
  device: DeviceState,
): ShellIO {
  let { stdin, stdout, stderr } = io;
  const sinkFor = (fd: number): OutputSink => {
    if (fd === 1) return stdout;
    if (fd === 2) return stderr;
    throw new RedirectError(`${fd}: bad file descriptor`);
  };
  const setSink = (fd: number, sink: OutputSink) => {
    if (fd === 1) stdout = sink;
    else if (fd === 2) stderr = sink;
    else throw new RedirectError(`${fd}: bad file descriptor`);
  };

  for (const redirect of redirects) {
    const target = expand(redirect);
    switch (redirect.op) {
      case '>':
      case '>>':
        // Only /dev/null is writable until the simulated filesystem exists.
        if (target !== '/dev/null') throw new RedirectError(`can't create ${target}: Read-only file system`);
        setSink(redirect.fd, NULL_SINK);
        break;
      case '<': {
        const content = device.readFile(target);
        if (content === undefined) throw new RedirectError(`can't open ${target}: No such file or directory`);
        if (redirect.fd !== 0) throw new RedirectError(`${redirect.fd}: bad file descriptor`);
        stdin = inputFrom(content);
        break;
      }
      case '>&':
        if (target === '-') setSink(redirect.fd, NULL_SINK);
        else if (/^[0-9]$/.test(target)) setSink(redirect.fd, sinkFor(Number(target)));
        else throw new RedirectError(`${target}: illegal file descriptor name`);
        break;
      case '<&':
        if (redirect.fd !== 0 || (target !== '0' && target !== '-')) throw new RedirectError(`${target}: bad file descriptor`);
        break;
    }
  }
  return { stdin, stdout, stderr };
}
