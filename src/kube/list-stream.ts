/**
 * Reads a Kubernetes list response (`{"kind":"…List","metadata":{…},"items":[…]}`) as its bytes
 * arrive, handing each item to a callback as soon as its last byte is in, so a list page costs
 * one item at a time, never the whole page.
 *
 * Why: a page's size in bytes is the server's to decide (a `limit` counts objects, and an object
 * may be 1.5 MiB of labels and managedFields), so a page read whole (its body, then its text,
 * then its parse) can be hundreds of MiB: 150 ConfigMaps carrying the largest label sets came
 * back as one 222 MiB page once a page of small objects had raised the adapted limit. What that
 * leaves behind (a large-object string, malloc arenas grown for the body) stays resident long
 * after the parse. Read item by item, a page holds the item being received and the list's own
 * fields, each bounded below, whatever the page holds.
 *
 * The scanner only tracks JSON structure (strings, escapes, nesting) to find where each element
 * of the top-level `items` array starts and ends; each item is then parsed by `JSON.parse`, so
 * what an item decodes to is exactly what a whole-body parse would give. Structural characters
 * are ASCII, so an item's bytes never split a UTF-8 sequence.
 */

import * as char from "./json-chars.ts";

/** The largest item a list may carry, in bytes of JSON: etcd keeps at most 1.5 MiB an object. */
export const MAX_LIST_ITEM_BYTES = 16 * 1024 * 1024;
/** The largest list outside its items (kind, apiVersion, metadata), in bytes of JSON. */
export const MAX_LIST_ENVELOPE_BYTES = 1024 * 1024;

const { QUOTE, BACKSLASH, OPEN_BRACE, CLOSE_BRACE, OPEN_BRACKET, CLOSE_BRACKET, COLON, COMMA } = char;

/** Thrown when a list's bytes are not the list JSON they should be, or break a bound. */
export class ListStreamError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ListStreamError";
  }
}

/** Label keys to keep: `keys` lists them, `has` tells one. */
export interface LabelKeySet {
  readonly keys: readonly string[];
  has(key: string): boolean;
}

/** What an item loses before it is parsed: the bytes of what nobody keeps never become strings. */
export interface ListItemFilter {
  /**
   * Keeps, of `metadata.labels`, only the labels whose keys are in the set this returns (asked
   * once an object; undefined keeps them all): the others' bytes are dropped as they arrive, most without even their key
   * becoming a string (a tenant's 845 KB of labels never become 2,190 pairs of strings).
   * @default every label kept
   */
  keepLabels?: (() => LabelKeySet | undefined) | undefined;
  /** Whether `metadata.managedFields` is replaced by an empty list (asked once an object). @default never */
  dropManagedFields?: (() => boolean) | undefined;
}

/** Options of {@link ListStreamParser}. */
export interface ListStreamOptions extends ListItemFilter {
  /** @default {@link MAX_LIST_ITEM_BYTES} */
  maxItemBytes?: number;
  /** @default {@link MAX_LIST_ENVELOPE_BYTES} */
  maxEnvelopeBytes?: number;
}

/** Depths of the object members that matter: the list's, an item's, its metadata's, its labels'. */
const LIST = 1;
const ITEMS = 2;
const ITEM = 3;
const METADATA = 4;
const LABELS = 5;

/**
 * Splits a list response into its items as bytes arrive: {@link push} each chunk, then
 * {@link end} for the list without its items (`items` is `[]` in it).
 */
export class ListStreamParser {
  private readonly onItem: (item: unknown) => void;
  private readonly maxItemBytes: number;
  private readonly maxEnvelopeBytes: number;
  private readonly keepLabels: (() => LabelKeySet | undefined) | undefined;
  /** The label keys kept for the item being received, and their lengths in UTF-8 bytes. */
  private labelKeys: LabelKeySet | undefined;
  private labelKeyLengths = new Set<number>();
  /** Whether the string being read held an escape. */
  private sawEscape = false;
  /** In `labels` mode: whether the label being received is kept (decided on its key). */
  private keepPair = false;
  private readonly dropManagedFields: (() => boolean) | undefined;
  /** Whether anything of an item is filtered (else an item's keys are not even looked at). */
  private readonly filtering: boolean;
  /** Open containers: 1 inside the top-level object. */
  private depth = 0;
  private inString = false;
  /** A backslash ended the last chunk inside a string: the next byte is escaped. */
  private escaped = false;
  /** Whether the next string is a member's key (after `{` or `,` in an object). */
  private keyNext = false;
  /** Whether each open container is an object (by depth). */
  private readonly isObject: boolean[] = [];
  /** The last key read at each depth that matters (LIST, ITEM, METADATA). */
  private readonly keyAt: string[] = ["", "", "", "", "", ""];
  /** The bytes of the key being read, when it is one that matters. */
  private keyPieces: Buffer[] | undefined;
  /** Inside the top-level `items` array. */
  private inItems = false;
  /** Whether the top-level `items` array was found. */
  private sawItems = false;
  /** The item being received: its pieces and their length (undefined between items). */
  private item: Buffer[] | undefined;
  private itemBytes = 0;
  /** Inside an item's managedFields (dropped) or labels (filtered), or neither. */
  private mode: "none" | "drop" | "labels" = "none";
  /** In `labels` mode: the label being received, and the labels kept so far (as JSON). */
  private pair: Buffer[] = [];
  private kept: string[] = [];
  /** The list outside its items. */
  private envelope: Buffer[] = [];
  private envelopeBytes = 0;
  private itemCount = 0;
  private bytes = 0;
  private readonly decoder = new TextDecoder();
  /** The chunk being scanned, where its bytes not yet given to their destination start, and
   * its next backslash at or after the scan (its length when none), found again once passed. */
  private chunk: Buffer = Buffer.alloc(0);
  private from = 0;
  private backslash = -1;

  constructor(onItem: (item: unknown) => void, options: ListStreamOptions = {}) {
    this.onItem = onItem;
    this.maxItemBytes = options.maxItemBytes ?? MAX_LIST_ITEM_BYTES;
    this.maxEnvelopeBytes = options.maxEnvelopeBytes ?? MAX_LIST_ENVELOPE_BYTES;
    this.keepLabels = options.keepLabels;
    this.dropManagedFields = options.dropManagedFields;
    this.filtering = this.keepLabels !== undefined || this.dropManagedFields !== undefined;
  }

  /** Items handed out so far. */
  get items(): number {
    return this.itemCount;
  }

  /** Bytes pushed so far. */
  get length(): number {
    return this.bytes;
  }

  /** Scans one chunk; calls `onItem` for every item it completes (what `onItem` throws, throws). */
  push(chunk: Buffer): void {
    this.bytes += chunk.length;
    this.chunk = chunk;
    this.from = 0;
    this.backslash = -1;
    const n = chunk.length;
    let i = 0;
    while (i < n) {
      if (this.inString) i = this.scanString(i);
      else this.structural(chunk[i]!, i++);
    }
    // A key split between chunks: its bytes go to their destination too.
    if (this.keyPieces) this.keyPieces.push(Buffer.from(chunk.subarray(this.from, n)));
    this.keep(chunk, this.from, n);
  }

  /** Scans a string from `i`; returns where scanning goes on. */
  private scanString(i: number): number {
    const chunk = this.chunk;
    const n = chunk.length;
    if (this.escaped) {
      this.escaped = false;
      return i + 1;
    }
    // Most of a list's bytes are inside strings: jump to the next quote or backslash.
    if (this.backslash < i) {
      this.backslash = chunk.indexOf(BACKSLASH, i);
      if (this.backslash < 0) this.backslash = n;
    }
    let q = chunk.indexOf(QUOTE, i);
    if (q < 0) q = n;
    if (this.backslash < q) {
      this.sawEscape = true;
      if (this.backslash + 1 >= n) {
        this.escaped = true;
        return n;
      }
      return this.backslash + 2;
    }
    if (q === n) return n;
    this.inString = false;
    if (this.keyPieces) this.endKey(q);
    return q + 1;
  }

  /** A key that matters ended at the quote at `q`. */
  private endKey(q: number): void {
    const chunk = this.chunk;
    const pieces = this.keyPieces!;
    this.keyPieces = undefined;
    const end = q + 1;
    if (this.mode === "labels" && this.depth === LABELS) {
      pieces.push(chunk.subarray(this.from, end));
      this.keep(chunk, this.from, end); // counted against the bound, kept below if wanted
      this.keepPair = this.wantLabel(pieces);
      if (this.keepPair) this.pair.push(...pieces);
    } else {
      const raw =
        pieces.length === 0
          ? chunk.toString("utf8", this.from, q)
          : Buffer.concat([...pieces, chunk.subarray(this.from, q)]).toString("utf8");
      this.keyAt[this.depth] = raw.includes("\\") ? (JSON.parse(`"${raw}"`) as string) : raw;
      this.keep(chunk, this.from, end);
    }
    this.from = end;
  }

  /** One byte outside strings. */
  private structural(c: number, i: number): void {
    switch (c) {
      case QUOTE:
        this.openString(i);
        break;
      case OPEN_BRACE:
      case OPEN_BRACKET:
        this.open(c, i);
        break;
      case CLOSE_BRACE:
      case CLOSE_BRACKET:
        this.close(i);
        break;
      case COMMA:
        this.comma(i);
        break;
      default:
        if (this.inItems && this.depth === ITEMS && c > 0x20 && c !== COLON && !this.item)
          throw new ListStreamError("a list item is not a JSON object");
    }
  }

  private openString(i: number): void {
    this.inString = true;
    this.sawEscape = false;
    if (!this.keyNext) return;
    this.keyNext = false;
    if (this.mode === "labels" && this.depth === LABELS) {
      // What came before a label's key is whitespace (or the comma already seen).
      this.from = i;
      this.keyPieces = [];
    } else if (this.keyMatters()) {
      this.keep(this.chunk, this.from, i + 1);
      this.from = i + 1;
      this.keyPieces = [];
    }
  }

  private open(c: number, i: number): void {
    const d = this.depth;
    if (this.inItems && d === ITEMS) {
      // An item starts: what came before it (`[`, a comma) is no part of it.
      this.keep(this.chunk, this.from, i);
      this.from = i;
      this.item = [];
      this.itemBytes = 0;
    } else if (this.item && d === METADATA && this.mode === "none" && this.keyAt[ITEM] === "metadata") {
      this.openMetadataMember(c, i);
    }
    this.depth++;
    this.isObject[this.depth] = c === OPEN_BRACE;
    this.keyNext = c === OPEN_BRACE;
    if (this.depth <= LABELS) this.keyAt[this.depth] = "";
    if (this.depth === ITEMS && c === OPEN_BRACKET && this.keyAt[LIST] === "items" && !this.sawItems) {
      // The envelope keeps `[`; the items between it and `]` are handed out instead.
      this.keep(this.chunk, this.from, i + 1);
      this.from = i + 1;
      this.inItems = true;
      this.sawItems = true;
    }
  }

  /** An object or list opens as the value of an item's metadata member: filtered, or not. */
  private openMetadataMember(c: number, i: number): void {
    const key = this.keyAt[METADATA];
    if (key === "managedFields" && this.dropManagedFields?.()) {
      this.keep(this.chunk, this.from, i);
      this.item!.push(Buffer.from(c === OPEN_BRACE ? "{}" : "[]"));
      this.from = i + 1;
      this.mode = "drop";
    } else if (key === "labels" && c === OPEN_BRACE) {
      const keys = this.keepLabels?.();
      if (!keys) return;
      this.keep(this.chunk, this.from, i);
      this.from = i + 1;
      this.mode = "labels";
      this.useLabelKeys(keys);
    }
  }

  private close(i: number): void {
    this.depth--;
    this.keyNext = false;
    if (this.depth < 0) throw new ListStreamError("the list response closes more than it opens");
    if (this.mode !== "none" && this.depth === METADATA) {
      this.keep(this.chunk, this.from, i);
      this.from = i + 1;
      if (this.mode === "labels") {
        this.endLabel();
        this.keepText(`{${this.kept.join(",")}}`);
        this.kept = [];
      }
      this.mode = "none";
    } else if (this.inItems && this.depth === ITEMS && this.item) {
      this.takeItem(this.chunk, this.from, i + 1);
      this.from = i + 1;
    } else if (this.inItems && this.depth === LIST) {
      this.skip(this.chunk, this.from, i);
      this.from = i;
      this.inItems = false;
    }
  }

  private comma(i: number): void {
    this.keyNext = this.isObject[this.depth] === true;
    if (this.mode === "labels" && this.depth === LABELS) {
      this.keep(this.chunk, this.from, i);
      this.from = i + 1;
      this.endLabel();
    } else if (this.inItems && this.depth === ITEMS) {
      this.skip(this.chunk, this.from, i + 1);
      this.from = i + 1;
    }
  }

  /** The list without its items; throws when the body ended early or was not a list. */
  end(): Record<string, unknown> {
    if (this.depth !== 0 || this.inString || this.item)
      throw new ListStreamError("the list response ended before its JSON did");
    const text = Buffer.concat(this.envelope).toString("utf8").trim();
    this.envelope = [];
    if (!text) throw new ListStreamError("the list response is empty");
    const list = JSON.parse(text) as unknown;
    if (typeof list !== "object" || list === null || Array.isArray(list))
      throw new ListStreamError("the list response is not a JSON object");
    return list as Record<string, unknown>;
  }

  /** Whether the key starting now is one the scanner must know (see {@link keyAt}). */
  private keyMatters(): boolean {
    switch (this.depth) {
      case LIST:
        return !this.inItems;
      case ITEM:
        return this.filtering && this.item !== undefined;
      case METADATA:
        return (
          this.filtering && this.item !== undefined && this.mode === "none" && this.keyAt[ITEM] === "metadata"
        );
      default:
        return false;
    }
  }

  /**
   * Gives bytes [from, to) of `chunk` to where they belong: the label being received, nowhere
   * (managedFields dropped), the item being received, or the envelope.
   */
  private keep(chunk: Buffer, from: number, to: number): void {
    if (to <= from) return;
    if (this.item) {
      this.itemBytes += to - from;
      if (this.itemBytes > this.maxItemBytes)
        throw new ListStreamError(`a list item is larger than ${this.maxItemBytes} bytes`);
      if (this.mode === "labels") {
        if (this.keepPair) this.pair.push(chunk.subarray(from, to));
      } else if (this.mode === "none") this.item.push(chunk.subarray(from, to));
      return;
    }
    if (this.inItems) {
      this.skip(chunk, from, to);
      return;
    }
    this.envelopeBytes += to - from;
    if (this.envelopeBytes > this.maxEnvelopeBytes)
      throw new ListStreamError(
        `a list's fields besides its items are larger than ${this.maxEnvelopeBytes} bytes`,
      );
    // A copy: keeping a view would keep the whole chunk (up to 64 KiB) for a few bytes.
    this.envelope.push(Buffer.from(chunk.subarray(from, to)));
  }

  /** Appends text made here (the kept labels) to the item being received. */
  private keepText(text: string): void {
    this.item!.push(Buffer.from(text));
  }

  /** A label's bytes are all in: kept (as its JSON text) when its key is wanted, else dropped. */
  private endLabel(): void {
    if (this.keepPair) this.kept.push(this.decoder.decode(Buffer.concat(this.pair)).trim());
    this.pair = [];
    this.keepPair = false;
  }

  /**
   * Whether the label whose key's JSON (quotes included) is in `pieces` is kept: a key whose
   * length matches no kept key's is dropped without becoming a string.
   */
  private wantLabel(pieces: Buffer[]): boolean {
    let bytes = 0;
    for (const p of pieces) bytes += p.length;
    if (!this.sawEscape && !this.labelKeyLengths.has(bytes - 2)) return false;
    const json = this.decoder.decode(pieces.length === 1 ? pieces[0] : Buffer.concat(pieces));
    return this.labelKeys!.has(this.sawEscape ? (JSON.parse(json) as string) : json.slice(1, -1));
  }

  private useLabelKeys(keys: LabelKeySet): void {
    if (keys === this.labelKeys) return;
    this.labelKeys = keys;
    this.labelKeyLengths = new Set(keys.keys.map((k) => Buffer.byteLength(k, "utf8")));
  }

  /** Bytes between items (whitespace, commas): only whitespace and one comma may be there. */
  private skip(chunk: Buffer, from: number, to: number): void {
    for (let k = from; k < to; k++) {
      const c = chunk[k]!;
      if (c > 0x20 && c !== COMMA) throw new ListStreamError("a list item is not a JSON object");
    }
  }

  private takeItem(chunk: Buffer, from: number, to: number): void {
    this.keep(chunk, from, to);
    const pieces = this.item!;
    this.item = undefined;
    this.itemBytes = 0;
    // Decoded piece by piece, never joined into one Buffer: a Buffer of an item's size is a
    // malloc of up to megabytes outside V8's heap, and glibc, once such a block is freed, serves
    // the next ones from its heap, which fragments and stays resident (BENCHMARKS.md).
    let text: string;
    if (pieces.length === 1) text = pieces[0]!.toString("utf8");
    else {
      text = "";
      for (let k = 0; k < pieces.length; k++)
        text += this.decoder.decode(pieces[k], { stream: k < pieces.length - 1 });
    }
    pieces.length = 0;
    this.itemCount++;
    this.onItem(JSON.parse(text));
  }
}
