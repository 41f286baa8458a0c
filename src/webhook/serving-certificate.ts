/**
 * The webhook's serving certificate, read from files and re-read when they change, so that a
 * rotation by cert-manager (or the kubelet refreshing a mounted Secret) takes effect without a
 * restart.
 *
 * Two triggers, because neither alone is reliable everywhere: `fs.watch` on the folders (a
 * mounted Secret is updated by swapping a `..data` symlink, which a watch on the file itself
 * misses, but a watch on its folder sees), and a periodic check for file systems where watches
 * do not fire. A pair that does not load (a key from one rotation and a certificate from the next,
 * read between two writes) is skipped, and the previous pair keeps serving until a good one
 * appears.
 */
import { watch, type FSWatcher } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { createSecureContext } from "node:tls";
import { X509Certificate } from "node:crypto";
import { silentLogger, type Logger } from "../api/log.ts";

/** A certificate chain and its private key, PEM. */
export interface KeyPair {
  cert: Buffer;
  key: Buffer;
}

/** Options for {@link ServingCertificate}. */
export interface ServingCertificateOptions {
  certFile: string;
  keyFile: string;
  /** Called with each new pair that loads; not called for the first. */
  onChange: (pair: KeyPair) => void;
  logger?: Logger;
  /** How often the files are checked besides the watch. @default 10000 */
  checkIntervalMs?: number;
}

/** Reads a key pair and throws, naming the files, when the two do not make a usable TLS identity. */
export async function readKeyPair(certFile: string, keyFile: string): Promise<KeyPair> {
  // Both reads settle before anything is thrown: with Promise.all, whichever file failed first
  // would name the error, so the message changed from run to run when both were missing.
  const [certRead, keyRead] = await Promise.allSettled([readFile(certFile), readFile(keyFile)]);
  if (certRead.status === "rejected" || keyRead.status === "rejected") {
    const failed = [certRead, keyRead].flatMap((r) =>
      r.status === "rejected" ? [(r.reason as Error).message] : [],
    );
    throw new Error(
      `cannot read the serving certificate ${certFile} and key ${keyFile}: ${failed.join("; ")}`,
      { cause: certRead.status === "rejected" ? certRead.reason : (keyRead as PromiseRejectedResult).reason },
    );
  }
  const cert = certRead.value;
  const key = keyRead.value;
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    throw new Error(
      `the serving certificate ${certFile} and key ${keyFile} do not load: ${(err as Error).message}`,
      { cause: err },
    );
  }
  return { cert, key };
}

/** SHA-256 fingerprint and expiry of the first certificate of a PEM chain, for logs. */
export function describeCertificate(pem: Buffer): { fingerprint256: string; validTo: string } {
  const cert = new X509Certificate(pem);
  return { fingerprint256: cert.fingerprint256, validTo: cert.validTo };
}

/** The current key pair, kept in step with its files until {@link ServingCertificate.close}. */
export class ServingCertificate {
  private pair: KeyPair;
  private readonly options: ServingCertificateOptions;
  private readonly logger: Logger;
  private readonly watchers: FSWatcher[] = [];
  private readonly timer: NodeJS.Timeout;
  private checking: Promise<boolean> | undefined;
  private next: Promise<boolean> | undefined;
  private closed = false;

  private constructor(options: ServingCertificateOptions, pair: KeyPair) {
    this.options = options;
    this.logger = options.logger ?? silentLogger;
    this.pair = pair;
    for (const dir of new Set([dirname(options.certFile), dirname(options.keyFile)])) {
      try {
        const watcher = watch(dir, { persistent: false }, () => void this.check());
        watcher.on("error", (err) =>
          this.logger.warn(
            { dir, err: err.message },
            "watching the certificate folder failed; checking on a timer",
          ),
        );
        this.watchers.push(watcher);
      } catch (err) {
        this.logger.warn(
          { dir, err: (err as Error).message },
          "cannot watch the certificate folder; checking on a timer",
        );
      }
    }
    this.timer = setInterval(() => void this.check(), options.checkIntervalMs ?? 10_000);
    this.timer.unref();
  }

  /** Reads the files (throws when they do not load) and starts following them. */
  static async open(options: ServingCertificateOptions): Promise<ServingCertificate> {
    return new ServingCertificate(options, await readKeyPair(options.certFile, options.keyFile));
  }

  /** The pair in use. */
  get current(): KeyPair {
    return this.pair;
  }

  /**
   * Re-reads the files; resolves true when a new pair was loaded (and `onChange` called). The
   * read starts after this call, so it sees every write made before it. Checks never overlap:
   * calls during one share the next.
   */
  check(): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    if (this.checking) {
      this.next ??= this.checking.then(() => {
        this.next = undefined;
        return this.check();
      });
      return this.next;
    }
    this.checking = this.load().finally(() => {
      this.checking = undefined;
    });
    return this.checking;
  }

  /** Stops watching. */
  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    for (const watcher of this.watchers.splice(0)) watcher.close();
  }

  private async load(): Promise<boolean> {
    let next: KeyPair;
    try {
      next = await readKeyPair(this.options.certFile, this.options.keyFile);
    } catch (err) {
      // Mid-rotation, or the files are gone for a moment: keep serving the pair we have.
      this.logger.warn(
        { err: (err as Error).message },
        "the serving certificate did not reload; keeping the current one",
      );
      return false;
    }
    if (next.cert.equals(this.pair.cert) && next.key.equals(this.pair.key)) return false;
    if (this.closed) return false;
    try {
      this.options.onChange(next);
    } catch (err) {
      // Not remembered as current, so the next check tries again.
      this.logger.error({ err: (err as Error).message }, "applying the new serving certificate failed");
      return false;
    }
    this.pair = next;
    this.logger.info(describeCertificate(next.cert), "serving certificate reloaded");
    return true;
  }
}
