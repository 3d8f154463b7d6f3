import { describe, expect, it } from "vitest";
import { AID, ROOT, SHELL, appCaller } from "./caller.js";
import { populateDefaultLayout } from "./default-layout.js";
import { FileSystem, S_IFDIR, S_IFLNK, S_IFMT, resolvePath } from "./file-system.js";
import { FsError } from "./fs-error.js";

function newFs(): FileSystem {
  const fs = new FileSystem();
  populateDefaultLayout(fs, () => "boot-id");
  return fs;
}

const code = (run: () => unknown) => {
  try {
    run();
  } catch (error) {
    return (error as FsError).code;
  }
  return "ok";
};

describe("FileSystem", () => {
  it("resolves paths against a cwd", () => {
    expect(resolvePath("/data/local", "../x/./y//z")).toBe("/data/x/y/z");
    expect(resolvePath("/a", "/b/..")).toBe("/");
  });

  it("follows symlinks except for lstat", () => {
    const fs = newFs();
    expect(fs.stat("/sdcard", SHELL).mode & S_IFMT).toBe(S_IFDIR);
    expect(fs.stat("/sdcard", SHELL, false).mode & S_IFMT).toBe(S_IFLNK);
    fs.writeFile("/sdcard/a.txt", Buffer.from("hi"), SHELL);
    expect(fs.readFile("/storage/emulated/0/a.txt", SHELL).toString()).toBe("hi");
  });

  it("checks permissions like Linux (root bypasses)", () => {
    const fs = newFs();
    fs.mkdir("/data/data/com.x", ROOT, { mode: 0o700, uid: 10_123, gid: 10_123 });
    expect(code(() => fs.writeFile("/data/data/com.x/f", Buffer.from("s"), SHELL))).toBe("EACCES");
    expect(code(() => fs.writeFile("/data/data/com.x/f", Buffer.from("s"), appCaller(10_123)))).toBe("ok");
    expect(code(() => fs.readFile("/data/data/com.x/f", SHELL))).toBe("EACCES");
    expect(fs.readFile("/data/data/com.x/f", ROOT).toString()).toBe("s");
    expect(code(() => fs.readdir("/data", SHELL))).toBe("EACCES");
    expect(code(() => fs.stat("/data/local/tmp", SHELL))).toBe("ok");
  });

  it("setgid directories hand their group down", () => {
    const fs = newFs();
    fs.mkdir("/sdcard/d", SHELL);
    fs.writeFile("/sdcard/d/f", Buffer.from("x"), SHELL);
    expect(fs.stat("/sdcard/d/f", SHELL).gid).toBe(AID.EVERYBODY);
    expect(fs.stat("/sdcard/d", SHELL).mode & 0o2000).toBe(0o2000);
  });

  it("errors: ENOENT, ENOTDIR, EISDIR, ENOTEMPTY, EEXIST, ENOSPC", () => {
    const fs = newFs();
    expect(code(() => fs.stat("/nope", SHELL))).toBe("ENOENT");
    fs.writeFile("/data/local/tmp/f", Buffer.from("x"), SHELL);
    expect(code(() => fs.stat("/data/local/tmp/f/g", SHELL))).toBe("ENOTDIR");
    expect(code(() => fs.readFile("/data/local/tmp", SHELL))).toBe("EISDIR");
    fs.mkdir("/data/local/tmp/d/e", SHELL, { parents: true });
    expect(code(() => fs.remove("/data/local/tmp/d", SHELL, { dirOnly: true }))).toBe("ENOTEMPTY");
    expect(code(() => fs.mkdir("/data/local/tmp/d", SHELL))).toBe("EEXIST");
    fs.capacityBytes = fs.usedBytes + 10;
    expect(code(() => fs.writeFile("/data/local/tmp/big", Buffer.alloc(11), SHELL))).toBe("ENOSPC");
    fs.remove("/data/local/tmp/f", SHELL);
    expect(code(() => fs.writeFile("/data/local/tmp/big", Buffer.alloc(11), SHELL))).toBe("ok");
  });

  it("computed files read fresh content", () => {
    let id = "one";
    const fs = new FileSystem();
    populateDefaultLayout(fs, () => id);
    expect(fs.readFile("/proc/sys/kernel/random/boot_id", SHELL).toString()).toBe("one\n");
    id = "two";
    expect(fs.readFile("/proc/sys/kernel/random/boot_id", SHELL).toString()).toBe("two\n");
  });
});
