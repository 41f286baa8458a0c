/**
 * Where a process's resident memory lies, from `/proc/<pid>/smaps` (Linux only): file-backed
 * pages (the node binary and its libraries), glibc's main heap (`[heap]`), its thread arenas
 * (anonymous mappings of up to 64 MiB at a 64 MiB boundary), thread stacks, and the rest of the
 * anonymous memory, which is V8's heap pages and code space, and malloc's own mmap chunks.
 *
 * A guide, not an exact split: glibc's thread arenas are told by their alignment, and a large
 * malloc chunk (mmap'd, over the threshold) counts as "other anonymous" beside V8's pages.
 */
import { readFile } from "node:fs/promises";

/** Resident MiB by kind of mapping. */
export interface MemoryMap {
  /** Resident pages of files (the node binary, shared libraries). */
  fileMiB: number;
  /** glibc's main arena (brk). */
  brkMiB: number;
  /** glibc's thread arenas: anonymous mappings within one 64 MiB-aligned region. */
  arenasMiB: number;
  /** Thread stacks: `[stack]`, and anonymous mappings of 8 MiB (glibc's default pthread stack). */
  stackMiB: number;
  /** Every other anonymous mapping: V8's pages (heap, code), malloc's mmap'd chunks. */
  otherAnonMiB: number;
  /** The sum: the process's RSS. */
  rssMiB: number;
}

const ARENA = 64 * 1024 * 1024;
const mib = (kb: number) => Number((kb / 1024).toFixed(1));

/** Reads and sums `/proc/<pid>/smaps` by kind of mapping. */
export async function memoryMap(pid: number): Promise<MemoryMap> {
  const text = await readFile(`/proc/${pid}/smaps`, "utf8");
  const kb = { file: 0, brk: 0, arenas: 0, stack: 0, other: 0 };
  let kind: keyof typeof kb = "other";
  for (const line of text.split("\n")) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ (\d+)\s*(.*)$/.exec(line);
    if (head) {
      const start = parseInt(head[1]!, 16);
      const end = parseInt(head[2]!, 16);
      const inode = head[4]!;
      const name = head[5]!.trim();
      if (name === "[heap]") kind = "brk";
      else if (name === "[stack]" || name.startsWith("[stack:")) kind = "stack";
      else if (inode !== "0" || name.startsWith("/")) kind = "file";
      else if (name.startsWith("["))
        kind = "file"; // [vdso], [vvar]: the kernel's, a few pages
      // glibc's heap_info of a thread arena sits at the start of a 64 MiB-aligned region.
      else if (
        Math.floor(start / ARENA) === Math.floor((end - 1) / ARENA) &&
        end - start <= ARENA &&
        start % ARENA === 0
      )
        kind = "arenas";
      // A thread stack: 8 MiB, glibc's default for a pthread (with or without its guard page).
      else if (end - start === 8 * 1024 * 1024 || end - start === 8 * 1024 * 1024 + 4096) kind = "stack";
      else kind = "other";
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) kb[kind] += Number(rss[1]);
  }
  return {
    fileMiB: mib(kb.file),
    brkMiB: mib(kb.brk),
    arenasMiB: mib(kb.arenas),
    stackMiB: mib(kb.stack),
    otherAnonMiB: mib(kb.other),
    rssMiB: mib(kb.file + kb.brk + kb.arenas + kb.stack + kb.other),
  };
}

// `node bench/memory-map.ts PID...`: one line of JSON per process.
if (import.meta.url === `file://${process.argv[1]}`) {
  for (const pid of process.argv.slice(2))
    process.stdout.write(`${pid} ${JSON.stringify(await memoryMap(Number(pid)))}\n`);
}
