import { FsError } from "./fs-error.js";
import type { Caller } from "./caller.js";

export const S_IFMT = 0o170000;
export const S_IFREG = 0o100000;
export const S_IFDIR = 0o040000;
export const S_IFLNK = 0o120000;
export const S_IFCHR = 0o020000;

interface NodeBase {
  /** Full st_mode: type bits and permission bits. */
  mode: number;
  uid: number;
  gid: number;
  /** Seconds since the epoch. */
  mtime: number;
  readonly ino: number;
}
export interface FileNode extends NodeBase {
  kind: "file";
  data: Buffer;
  /** Computed content (procfs-like); wins over data. */
  dynamic?: () => Buffer;
}
export interface DirNode extends NodeBase {
  kind: "dir";
  children: Map<string, FsNode>;
}
export interface SymlinkNode extends NodeBase {
  kind: "symlink";
  target: string;
}
/** A character device that reads empty and swallows writes (/dev/null). */
export interface CharNode extends NodeBase {
  kind: "char";
}
export type FsNode = FileNode | DirNode | SymlinkNode | CharNode;

export interface StatInfo {
  mode: number;
  size: number;
  uid: number;
  gid: number;
  mtime: number;
  ino: number;
  nlink: number;
}

export interface DirEntry {
  name: string;
  stat: StatInfo;
}

export interface WriteOptions {
  /** Permission bits for a new file (default 0666 & ~umask 077 → 0600 for apps; we use 0644 like adb push). */
  mode?: number;
  mtime?: number;
  append?: boolean;
}

const R = 4;
const W = 2;
const X = 1;
const MAX_SYMLINKS = 40;

/** Seconds since the epoch, the resolution st_mtime is carried in over sync v1. */
export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/** Joins and normalises a path against a working directory ('.', '..', duplicate slashes). */
export function resolvePath(cwd: string, path: string): string {
  const parts: string[] = [];
  for (const part of (path.startsWith("/") ? path : `${cwd}/${path}`).split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") parts.pop();
    else parts.push(part);
  }
  return `/${parts.join("/")}`;
}

/**
 * A device's in-memory filesystem: a tree with Unix modes, owners and mtimes,
 * permission checks against a caller (root bypasses them), symlinks, and a
 * capacity so "storage full" can be simulated.
 */
export class FileSystem {
  readonly root: DirNode;
  private nextIno = 2;
  /** Bytes of regular-file data stored. */
  usedBytes = 0;
  /** Writes fail with ENOSPC beyond this many bytes, or whenever isFull() says so. */
  capacityBytes = 64 * 1024 * 1024 * 1024;
  isFull: () => boolean = () => false;

  constructor() {
    this.root = { kind: "dir", mode: S_IFDIR | 0o755, uid: 0, gid: 0, mtime: nowSeconds(), ino: 1, children: new Map() };
  }

  // --- lookups --------------------------------------------------------------

  /** The node at path (following symlinks, the last one only if follow). */
  lookup(path: string, caller: Caller, follow = true): FsNode {
    return this.walk(resolvePath("/", path), caller, follow, 0).node;
  }

  exists(path: string, caller: Caller): boolean {
    try {
      this.lookup(path, caller);
      return true;
    } catch {
      return false;
    }
  }

  stat(path: string, caller: Caller, follow = true): StatInfo {
    return statOf(this.lookup(path, caller, follow));
  }

  readFile(path: string, caller: Caller): Buffer {
    const node = this.lookup(path, caller);
    if (node.kind === "dir") throw new FsError("EISDIR", path);
    this.check(node, caller, R, path);
    return contentOf(node);
  }

  readdir(path: string, caller: Caller): DirEntry[] {
    const node = this.lookup(path, caller);
    if (node.kind !== "dir") throw new FsError("ENOTDIR", path);
    this.check(node, caller, R, path);
    return [...node.children.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([name, child]) => ({ name, stat: statOf(child) }));
  }

  // --- changes --------------------------------------------------------------

  /** Creates or replaces (or appends to) a regular file. */
  writeFile(path: string, data: Buffer, caller: Caller, options: WriteOptions = {}): FileNode {
    const file = this.openForWrite(path, caller, options);
    const grown = options.append ? data.length : data.length - file.data.length;
    this.reserve(grown, path);
    file.data = options.append ? Buffer.concat([file.data, data]) : data;
    file.mtime = options.mtime ?? nowSeconds();
    return file;
  }

  /**
   * Opens (creating or truncating unless append) a regular file for writing,
   * as open(O_CREAT|O_WRONLY) would: the permission checks happen here.
   */
  openForWrite(path: string, caller: Caller, options: WriteOptions = {}): FileNode {
    const full = resolvePath("/", path);
    let existing: FsNode | undefined;
    try {
      existing = this.lookup(full, caller);
    } catch (error) {
      if (!(error instanceof FsError) || error.code !== "ENOENT") throw error;
    }
    if (existing) {
      if (existing.kind === "dir") throw new FsError("EISDIR", full);
      if (existing.kind !== "file") throw new FsError("EINVAL", full);
      this.check(existing, caller, W, full);
      if (!options.append) {
        this.usedBytes -= existing.data.length;
        existing.data = Buffer.alloc(0);
        existing.mtime = nowSeconds();
      }
      return existing;
    }
    const { parent, name } = this.parentOf(full, caller);
    this.check(parent, caller, W | X, full);
    if (this.isFull()) throw new FsError("ENOSPC", full);
    const file: FileNode = { kind: "file", mode: S_IFREG | ((options.mode ?? 0o644) & 0o7777), uid: caller.uid, gid: inheritedGid(parent, caller), mtime: options.mtime ?? nowSeconds(), ino: this.nextIno++, data: Buffer.alloc(0) };
    parent.children.set(name, file);
    parent.mtime = nowSeconds();
    return file;
  }

  /** Appends to a file opened with openForWrite, enforcing the capacity. */
  append(file: FileNode, chunk: Buffer, path = "?"): void {
    this.reserve(chunk.length, path);
    file.data = file.data.length === 0 ? Buffer.from(chunk) : Buffer.concat([file.data, chunk]);
    file.mtime = nowSeconds();
  }

  mkdir(path: string, caller: Caller, options: { parents?: boolean; mode?: number; uid?: number; gid?: number } = {}): DirNode {
    const full = resolvePath("/", path);
    if (options.parents) {
      let current = "";
      let node: DirNode = this.root;
      for (const part of full.split("/").filter(Boolean)) {
        current += `/${part}`;
        const child = this.tryLookup(current, caller);
        if (child) {
          if (child.kind !== "dir") throw new FsError("ENOTDIR", current);
          node = child;
        } else {
          node = this.mkdir(current, caller, { ...options, parents: false });
        }
      }
      return node;
    }
    if (this.tryLookup(full, caller, false)) throw new FsError("EEXIST", full);
    const { parent, name } = this.parentOf(full, caller);
    this.check(parent, caller, W | X, full);
    if (this.isFull()) throw new FsError("ENOSPC", full);
    // A setgid parent passes its group and the setgid bit on, as on Linux.
    const setgid = parent.mode & 0o2000;
    const dir: DirNode = {
      kind: "dir",
      mode: S_IFDIR | (((options.mode ?? 0o775) | setgid) & 0o7777),
      uid: options.uid ?? caller.uid,
      gid: options.gid ?? inheritedGid(parent, caller),
      mtime: nowSeconds(),
      ino: this.nextIno++,
      children: new Map(),
    };
    parent.children.set(name, dir);
    parent.mtime = nowSeconds();
    return dir;
  }

  /** rename(2): replaces a non-directory target atomically, keeps the inode. */
  rename(from: string, to: string, caller: Caller): void {
    const src = resolvePath("/", from);
    const dst = resolvePath("/", to);
    const node = this.lookup(src, caller, false);
    const source = this.parentOf(src, caller);
    const target = this.parentOf(dst, caller);
    this.check(source.parent, caller, W | X, src);
    this.check(target.parent, caller, W | X, dst);
    const existing = target.parent.children.get(target.name);
    if (existing?.kind === "dir") throw new FsError("EISDIR", dst);
    if (existing?.kind === "file") this.usedBytes -= existing.data.length;
    source.parent.children.delete(source.name);
    target.parent.children.set(target.name, node);
    source.parent.mtime = target.parent.mtime = nowSeconds();
  }

  symlink(target: string, path: string, caller: Caller): void {
    const full = resolvePath("/", path);
    if (this.tryLookup(full, caller, false)) throw new FsError("EEXIST", full);
    const { parent, name } = this.parentOf(full, caller);
    this.check(parent, caller, W | X, full);
    parent.children.set(name, { kind: "symlink", mode: S_IFLNK | 0o777, uid: caller.uid, gid: caller.gids[0] ?? caller.uid, mtime: nowSeconds(), ino: this.nextIno++, target });
  }

  /** unlink/rmdir; recursive removes a whole tree (rm -r). */
  remove(path: string, caller: Caller, options: { recursive?: boolean; dirOnly?: boolean } = {}): void {
    const full = resolvePath("/", path);
    if (full === "/") throw new FsError("EPERM", full);
    const node = this.lookup(full, caller, false);
    const { parent, name } = this.parentOf(full, caller);
    this.check(parent, caller, W | X, full);
    if (node.kind === "dir") {
      if (!options.recursive && !options.dirOnly) throw new FsError("EISDIR", full);
      if (node.children.size > 0) {
        if (!options.recursive) throw new FsError("ENOTEMPTY", full);
        for (const child of [...node.children.keys()]) this.remove(`${full}/${child}`, caller, options);
      }
    } else if (options.dirOnly) {
      throw new FsError("ENOTDIR", full);
    }
    if (node.kind === "file") this.usedBytes -= node.data.length;
    parent.children.delete(name);
    parent.mtime = nowSeconds();
  }

  chown(path: string, uid: number, gid: number): void {
    const node = this.lookup(path, { uid: 0, gids: [0] });
    node.uid = uid;
    node.gid = gid;
  }

  /** Adds a computed read-only file (e.g. /proc entries) or /dev/null-like device. */
  addSpecial(path: string, kind: "dynamic" | "null", read: () => Buffer = () => Buffer.alloc(0)): void {
    const full = resolvePath("/", path);
    const { parent, name } = this.parentOf(full, { uid: 0, gids: [0] });
    const base = { uid: 0, gid: 0, mtime: nowSeconds(), ino: this.nextIno++ };
    parent.children.set(name, kind === "null" ? { kind: "char", mode: S_IFCHR | 0o666, ...base } : { kind: "file", mode: S_IFREG | 0o444, data: Buffer.alloc(0), dynamic: read, ...base });
  }

  // --- internals ------------------------------------------------------------

  private tryLookup(path: string, caller: Caller, follow = true): FsNode | undefined {
    try {
      return this.lookup(path, caller, follow);
    } catch (error) {
      if (error instanceof FsError && error.code === "ENOENT") return undefined;
      throw error;
    }
  }

  private parentOf(full: string, caller: Caller): { parent: DirNode; name: string } {
    const slash = full.lastIndexOf("/");
    const name = full.slice(slash + 1);
    const parent = this.lookup(full.slice(0, slash) || "/", caller);
    if (parent.kind !== "dir") throw new FsError("ENOTDIR", full);
    return { parent, name };
  }

  private walk(full: string, caller: Caller, follow: boolean, depth: number): { node: FsNode; path: string } {
    if (depth > MAX_SYMLINKS) throw new FsError("ELOOP", full);
    const parts = full.split("/").filter(Boolean);
    let node: FsNode = this.root;
    let path = "";
    for (let index = 0; index < parts.length; index++) {
      if (node.kind !== "dir") throw new FsError("ENOTDIR", full);
      this.check(node, caller, X, full);
      const child: FsNode | undefined = node.children.get(parts[index]!);
      if (!child) throw new FsError("ENOENT", full);
      const isLast = index === parts.length - 1;
      if (child.kind === "symlink" && (!isLast || follow)) {
        const target = resolvePath(path || "/", child.target);
        const rest = parts.slice(index + 1).join("/");
        return this.walk(rest ? `${target}/${rest}` : target, caller, follow, depth + 1);
      }
      node = child;
      path += `/${parts[index]}`;
    }
    return { node, path: path || "/" };
  }

  private check(node: FsNode, caller: Caller, want: number, path: string): void {
    if (caller.uid === 0) return;
    const bits = caller.uid === node.uid ? (node.mode >> 6) & 7 : caller.gids.includes(node.gid) ? (node.mode >> 3) & 7 : node.mode & 7;
    if ((bits & want) !== want) throw new FsError("EACCES", path);
  }

  private reserve(bytes: number, path: string): void {
    if (bytes > 0 && (this.isFull() || this.usedBytes + bytes > this.capacityBytes)) throw new FsError("ENOSPC", path);
    this.usedBytes += bytes;
  }
}

/** New entries in a setgid directory take its group; elsewhere the caller's primary group. */
function inheritedGid(parent: DirNode, caller: Caller): number {
  return parent.mode & 0o2000 ? parent.gid : (caller.gids[0] ?? caller.uid);
}

export function contentOf(node: FsNode): Buffer {
  if (node.kind === "file") return node.dynamic ? node.dynamic() : node.data;
  if (node.kind === "symlink") return Buffer.from(node.target);
  return Buffer.alloc(0);
}

export function statOf(node: FsNode): StatInfo {
  const size = node.kind === "file" ? (node.dynamic ? 0 : node.data.length) : node.kind === "dir" ? 4096 : node.kind === "symlink" ? Buffer.byteLength(node.target) : 0;
  const nlink = node.kind === "dir" ? 2 + [...node.children.values()].filter((child) => child.kind === "dir").length : 1;
  return { mode: node.mode, size, uid: node.uid, gid: node.gid, mtime: node.mtime, ino: node.ino, nlink };
}

export function isDir(mode: number): boolean {
  return (mode & S_IFMT) === S_IFDIR;
}
