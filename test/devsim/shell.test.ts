import { describe, expect, it } from "vitest";
import { DeviceState } from "./device/device-state.js";
import { BytePipe, CollectingSink, inputFrom } from "./shell/io.js";
import { runInteractive } from "./shell/interactive.js";
import { parseScript } from "./shell/parser.js";
import { Shell } from "./shell/shell.js";
import { ShellSyntaxError } from "./shell/tokenizer.js";

const BOOT_ID = "0b6f3c55-0d7e-4bd5-9a43-3a0b4f9d1e2f";

function newDevice(): DeviceState {
  return new DeviceState({ "ro.product.model": "Pixel 7", "ro.serialno": "ABC123", "sys.boot_completed": "1" }, BOOT_ID);
}

async function sh(script: string, options: { device?: DeviceState; stdin?: string; signal?: AbortSignal } = {}) {
  const stdout = new CollectingSink();
  const stderr = new CollectingSink();
  const shell = new Shell({
    device: options.device ?? newDevice(),
    stdout,
    stderr,
    ...(options.stdin !== undefined ? { stdin: inputFrom(options.stdin) } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const status = await shell.run(script);
  return { status, stdout: stdout.text(), stderr: stderr.text() };
}

describe("shell parsing", () => {
  it("parses lists, and-or chains, pipelines and loops", () => {
    const list = parseScript("a; b && c || d | e\nwhile true; do sleep 1; done");
    expect(list.items).toHaveLength(3);
    expect(list.items[1]!.rest.map((r) => r.op)).toEqual(["&&", "||"]);
    expect(list.items[1]!.rest[1]!.pipeline.commands).toHaveLength(2);
    expect(list.items[2]!.first.commands[0]!.type).toBe("loop");
  });

  it("marks unfinished input as incomplete and real errors as not", () => {
    for (const text of ["echo 'abc", "echo \"abc", "true &&", "while true; do echo", "if true; then echo x"]) {
      expect(() => parseScript(text), text).toThrow(expect.objectContaining({ incomplete: true }));
    }
    expect(() => parseScript("; echo")).toThrow(ShellSyntaxError);
    expect(parseScript("echo a & echo b").items.map((i) => i.background ?? false)).toEqual([true, false]);
    expect(() => parseScript("echo $((1+2))")).toThrow(/not supported/);
    expect(() => parseScript("echo $(id")).toThrow(expect.objectContaining({ incomplete: true }));
  });
});

describe("background jobs", () => {
  it("tests files and strings with the test builtin, as mksh does", async () => {
    const r = await sh(
      "[ -d /data/local/tmp ] && echo dir; [ -e /data/local/tmp/none ] || echo missing; echo x > /data/local/tmp/t; [ -f /data/local/tmp/t ] && [ -s /data/local/tmp/t ] && echo file; test -z \"\" && test a != b && echo strings; [ ! -d /data/local/tmp/t ] && echo notdir; [ -e /x; echo $?",
    );
    expect(r.stdout).toBe("dir\nmissing\nfile\nstrings\nnotdir\n2\n");
  });

  it("runs `&` without waiting; wait collects the status and $! names the job", async () => {
    const r = await sh("sh -c \"sleep 0.05; exit 3\" & echo started; wait $!; echo \"rc=$?\"");
    expect(r.stdout).toBe("started\nrc=3\n");
  });

  it("a nohup job outlives the session that started it; a plain one does not", async () => {
    const device = newDevice();
    const hangup = new AbortController();
    const run = sh("nohup sh -c \"sleep 0.1; echo done > /data/local/tmp/nohup.txt\" & sh -c \"sleep 0.1; echo done > /data/local/tmp/plain.txt\" & wait", { device, signal: hangup.signal });
    setTimeout(() => hangup.abort(), 20);
    await run;
    await new Promise((r) => setTimeout(r, 250));
    expect(device.readFile("/data/local/tmp/nohup.txt")?.toString()).toBe("done\n");
    expect(device.readFile("/data/local/tmp/plain.txt")).toBeUndefined();
  });

  it("a ( subshell ) keeps exit, cd and variables inside; eval runs a string; read takes a file's first line", async () => {
    const r = await sh(
      "X=1; (X=2; cd /data; exit 4); echo \"rc=$?\"; echo \"X=$X $(pwd)\"; (eval \"echo a; exit 5\"); echo \"rc=$?\"; echo \"one two\" > /data/local/tmp/r; echo more >> /data/local/tmp/r; read -r L < /data/local/tmp/r; echo \"[$L]\"; read -r M < /data/local/tmp/none; echo \"rc=$?\"",
    );
    expect(r.stdout).toBe("rc=4\nX=1 /\na\nrc=5\n[one two]\nrc=1\n");
  });

  it("a background subshell that starts with trap '' HUP outlives the session, as nohup does", async () => {
    const device = newDevice();
    const hangup = new AbortController();
    const run = sh("( trap '' HUP; sleep 0.1; echo done > /data/local/tmp/trap.txt ) & ( sleep 0.1; echo done > /data/local/tmp/plain2.txt ) & wait", { device, signal: hangup.signal });
    setTimeout(() => hangup.abort(), 20);
    await run;
    await new Promise((r) => setTimeout(r, 250));
    expect(device.readFile("/data/local/tmp/trap.txt")?.toString()).toBe("done\n");
    expect(device.readFile("/data/local/tmp/plain2.txt")).toBeUndefined();
  });

  it("[ compares integers with -eq -ne -lt -le -gt -ge, and calls a non-number a bad expression", async () => {
    const r = await sh("S=130; [ $S -ge 128 ] && echo a; [ 7 -lt 10 ] && echo b; [ 3 -eq 3 ] && echo c; [ 3 -ne 3 ] || echo d; [ 5 -gt 5 ] || echo e; [ 5 -le 5 ] && echo f; [ x -ge 1 ]; echo \"rc=$?\"");
    expect(r.stdout).toBe("a\nb\nc\nd\ne\nf\nrc=2\n");
  });

  it("eval of text that does not parse reports it and fails, as mksh does, and the session goes on", async () => {
    const r = await sh("eval 'echo (' ; echo \"rc=$?\"; (eval 'if then'); echo \"rc=$?\"");
    expect(r.stdout).toBe("rc=1\nrc=1\n");
    expect(r.stderr).toContain("eval: syntax error");
  });

  it("trap \"\" 1 and trap '' SIGHUP make a job outlive the session too; another trap does not", async () => {
    const device = newDevice();
    const hangup = new AbortController();
    const run = sh(
      "( trap \"\" 1; sleep 0.1; echo a > /data/local/tmp/t1 ) & ( trap '' SIGHUP; sleep 0.1; echo b > /data/local/tmp/t2 ) & ( trap '' INT; sleep 0.1; echo c > /data/local/tmp/t3 ) & wait",
      { device, signal: hangup.signal },
    );
    setTimeout(() => hangup.abort(), 20);
    await run;
    await new Promise((r) => setTimeout(r, 250));
    expect(device.readFile("/data/local/tmp/t1")?.toString()).toBe("a\n");
    expect(device.readFile("/data/local/tmp/t2")?.toString()).toBe("b\n");
    expect(device.readFile("/data/local/tmp/t3")).toBeUndefined();
  });

  it("a reboot ends nohup jobs; mv renames in one step", async () => {
    const device = newDevice();
    await sh("nohup sh -c \"sleep 0.1; echo x > /data/local/tmp/a.tmp; mv /data/local/tmp/a.tmp /data/local/tmp/a.done\" &", { device });
    device.reboot();
    await new Promise((r) => setTimeout(r, 200));
    expect(device.readFile("/data/local/tmp/a.done")).toBeUndefined();
    expect(await sh("echo y > /data/local/tmp/b.tmp && mv /data/local/tmp/b.tmp /data/local/tmp/b.done && cat /data/local/tmp/b.done; cat /data/local/tmp/b.tmp", { device })).toMatchObject({
      stdout: "y\n",
      stderr: expect.stringContaining("b.tmp"),
    });
  });
});

describe("shell execution", () => {
  it("echo with quoting and escapes", async () => {
    expect((await sh(`echo a   b 'c   d' "e  f" g\\ h`)).stdout).toBe("a b c   d e  f g h\n");
    expect((await sh(`echo "it's" 'say "hi"' "\\"q\\" \\$x"`)).stdout).toBe(`it's say "hi" "q" $x\n`);
    expect((await sh(`echo -n x; echo -e 'a\\tb\\c'; echo -ne '1\\n'`)).stdout).toBe("xa\tb1\n");
    expect((await sh(`echo '' "" x`)).stdout).toBe("  x\n");
    expect((await sh("echo a#b # comment")).stdout).toBe("a#b\n");
  });

  it("; && || and $?", async () => {
    expect(await sh("echo a && echo b")).toMatchObject({ status: 0, stdout: "a\nb\n" });
    expect(await sh("false && echo no; echo $?")).toMatchObject({ status: 0, stdout: "1\n" });
    expect(await sh("false || echo yes")).toMatchObject({ status: 0, stdout: "yes\n" });
    expect(await sh("true && false || echo recovered; echo \"status=$?\"")).toMatchObject({ stdout: "recovered\nstatus=0\n" });
    expect(await sh("false; echo ${?}")).toMatchObject({ stdout: "1\n" });
    expect(await sh("! false && echo negated")).toMatchObject({ stdout: "negated\n" });
    expect((await sh("false")).status).toBe(1);
  });

  it("exit N stops the script with that status", async () => {
    expect(await sh("echo before; exit 3; echo after")).toMatchObject({ status: 3, stdout: "before\n" });
    expect((await sh("exit 258")).status).toBe(2);
    expect((await sh("false; exit")).status).toBe(1);
  });

  it("unknown commands: sh error on stderr, status 127", async () => {
    expect(await sh("nosuchcmd --flag")).toEqual({ status: 127, stdout: "", stderr: "/system/bin/sh: nosuchcmd: not found\n" });
    expect(await sh("nosuchcmd 2>/dev/null; echo $?")).toEqual({ status: 0, stdout: "127\n", stderr: "" });
    expect((await sh("/system/bin/getprop ro.serialno")).stdout).toBe("ABC123\n");
    expect((await sh("/data/local/tmp/getprop")).status).toBe(127);
  });

  it("redirections apply left to right", async () => {
    expect(await sh("nosuchcmd 2>&1")).toMatchObject({ stdout: "/system/bin/sh: nosuchcmd: not found\n", stderr: "" });
    expect(await sh("echo out >/dev/null 2>&1; echo err 1>&2")).toEqual({ status: 0, stdout: "", stderr: "err\n" });
    expect(await sh("nosuchcmd 2>&1 >/dev/null")).toMatchObject({ stdout: "/system/bin/sh: nosuchcmd: not found\n" });
    expect(await sh("cat </proc/sys/kernel/random/boot_id")).toMatchObject({ stdout: `${BOOT_ID}\n` });
    expect(await sh("echo x > /system/f")).toMatchObject({ status: 1, stderr: "/system/bin/sh: can't create /system/f: Permission denied\n" });
  });

  it("getprop lists every property or prints one value", async () => {
    const all = await sh("getprop");
    expect(all.stdout).toBe("[ro.product.model]: [Pixel 7]\n[ro.serialno]: [ABC123]\n[sys.boot_completed]: [1]\n");
    expect((await sh("getprop ro.product.model")).stdout).toBe("Pixel 7\n");
    expect((await sh("getprop no.such.prop")).stdout).toBe("\n");
    expect((await sh("getprop no.such.prop fallback")).stdout).toBe("fallback\n");
  });

  it("setprop changes writable properties, refuses set ro.* ones", async () => {
    const device = newDevice();
    expect(await sh("setprop debug.devsim \"hello world\" && getprop debug.devsim", { device })).toMatchObject({ status: 0, stdout: "hello world\n" });
    expect(device.props.get("debug.devsim")).toBe("hello world");
    const refused = await sh("setprop ro.product.model Other", { device });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain("failed to set property 'ro.product.model'");
    expect(device.props.get("ro.product.model")).toBe("Pixel 7");
  });

  it("cat reads the boot id and stdin; missing files fail", async () => {
    expect(await sh("cat /proc/sys/kernel/random/boot_id")).toEqual({ status: 0, stdout: `${BOOT_ID}\n`, stderr: "" });
    expect(await sh("cat", { stdin: "from stdin" })).toMatchObject({ stdout: "from stdin" });
    expect(await sh("cat /nope")).toEqual({ status: 1, stdout: "", stderr: "cat: /nope: No such file or directory\n" });
  });

  it("command substitution: $(…) and backquotes, nested, quoted, trailing newlines removed", async () => {
    expect((await sh("echo \"[$(getprop ro.serialno)]\"")).stdout).toBe("[ABC123]\n");
    expect((await sh("X=$(echo a; echo b); echo $X; echo \"$X\"")).stdout).toBe("a b\na\nb\n");
    expect((await sh("echo `echo back` $(echo \"$(echo \"nested )\")\")")).stdout).toBe("back nested )\n");
    expect((await sh("echo $(echo ')')")).stdout).toBe(")\n");
    expect((await sh("X=$(false); echo $?")).stdout).toBe("1\n");
  });

  it("variables, field splitting and pipes", async () => {
    expect((await sh("X=\"a  b\"; echo $X; echo \"$X\"")).stdout).toBe("a b\na  b\n");
    expect((await sh("echo piped | cat | cat")).stdout).toBe("piped\n");
    expect((await sh("echo $HOSTNAME-$UNSET-")).stdout).toBe("localhost--\n");
  });

  it("while/until/if, as in adbkit waitBootComplete", async () => {
    const script = "while getprop sys.boot_completed 2>/dev/null; do exit 0; done";
    expect(await sh(script)).toEqual({ status: 0, stdout: "1\n", stderr: "" });
    expect((await sh("until true; do echo never; done; echo done")).stdout).toBe("done\n");
    expect((await sh("if false; then echo a; elif true; then echo b; else echo c; fi")).stdout).toBe("b\n");
  });

  it("sleep waits, and an aborted session stops a running loop", async () => {
    const started = Date.now();
    expect((await sh("sleep 0.05 && echo slept")).stdout).toBe("slept\n");
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);

    const abort = new AbortController();
    const running = sh("while true; do sleep 0.01; done", { signal: abort.signal });
    setTimeout(() => abort.abort(), 30);
    expect((await running).status).toBe(129);

    const busy = new AbortController();
    const spinning = sh("while true; do true; done", { signal: busy.signal });
    setTimeout(() => busy.abort(), 30);
    expect((await spinning).status).toBe(129);
  });

  it("reports syntax errors like sh", async () => {
    expect(await sh("echo \"unterminated")).toMatchObject({ status: 1, stderr: expect.stringContaining("/system/bin/sh: syntax error") });
  });
});

describe("files", () => {
  it("> and >> write files that cat, ls and sha256sum see", async () => {
    const device = newDevice();
    expect(await sh("echo one > /sdcard/f.txt && echo two >> /sdcard/f.txt && cat /sdcard/f.txt", { device })).toMatchObject({ status: 0, stdout: "one\ntwo\n" });
    expect((await sh("sha256sum /sdcard/f.txt", { device })).stdout).toBe("c3f9c8c283a2b1f2f1896f27a01cbe3cddc0c9d93f752e4639035a0f5b36f6e8  /sdcard/f.txt\n");
    expect((await sh("ls /sdcard/", { device })).stdout).toContain("f.txt\n");
    expect((await sh("ls -l /storage/emulated/0/f.txt", { device })).stdout).toMatch(/^-rw-r--r-- +1 shell everybody +8 \d{4}-\d\d-\d\d \d\d:\d\d \/storage\/emulated\/0\/f.txt\n$/);
    expect((await sh("ls -l /sdcard", { device })).stdout).toMatch(/^lrwxrwxrwx .* \/sdcard -> \/storage\/self\/primary\n$/);
  });

  it("mkdir -p, rm -r, cd and relative paths", async () => {
    const device = newDevice();
    expect((await sh("mkdir /data/local/tmp/a/b", { device })).stderr).toBe("mkdir: /data/local/tmp/a/b: No such file or directory\n");
    expect((await sh("mkdir -p /data/local/tmp/a/b && cd /data/local/tmp/a && echo x > b/c && pwd && ls b", { device })).stdout).toBe("/data/local/tmp/a\nc\n");
    expect((await sh("rm /data/local/tmp/a", { device })).stderr).toBe("rm: /data/local/tmp/a: Is a directory\n");
    expect((await sh("rm -r /data/local/tmp/a && ls /data/local/tmp", { device })).stdout).toBe("");
    expect(await sh("rm -f /data/local/tmp/nothing")).toMatchObject({ status: 0, stderr: "" });
  });

  it("permissions: shell cannot list /data or read other users’ private files", async () => {
    expect(await sh("ls /data")).toMatchObject({ status: 1, stderr: "ls: /data: Permission denied\n" });
    expect(await sh("cat /proc/sys/kernel/random/boot_id > /data/x")).toMatchObject({ status: 1, stderr: "/system/bin/sh: can't create /data/x: Permission denied\n" });
  });
});

describe("interactive shell (script on stdin)", () => {
  it("runs lines as they arrive, waits for multi-line commands, stops at exit", async () => {
    const stdin = new BytePipe();
    const stdout = new CollectingSink();
    const shell = new Shell({ device: newDevice(), stdin, stdout, stderr: stdout });
    const done = runInteractive(shell, stdin, stdout, "$ ");
    await stdin.write("echo one\nif true; then\n");
    await stdin.write("  echo two\nfi\nexit 4\necho never\n");
    stdin.close();
    expect(await done).toBe(4);
    expect(stdout.text()).toBe("$ one\n$ > > two\n$ ");
  });
});
