/**
 * A self-signed serving certificate made in process (EC P-256, ECDSA with SHA-256), for secure
 * metrics when no certificate folder is given: controller-runtime's metrics server does the
 * same. Node's crypto signs but has no certificate builder, and the image has no openssl, so
 * the few DER structures of RFC 5280 that a certificate needs are written here.
 */
import { generateKeyPairSync, randomBytes, sign } from "node:crypto";

/** A PEM certificate and its PEM private key. */
export interface SelfSignedPair {
  cert: string;
  key: string;
}

/** Options for {@link selfSignedCertificate}. */
export interface SelfSignedOptions {
  /** The subject's common name. @default "referable-controller" */
  commonName?: string;
  /** DNS names of the subjectAltName. @default ["localhost"] */
  dnsNames?: readonly string[];
  /** IPv4 addresses of the subjectAltName. @default ["127.0.0.1"] */
  ipAddresses?: readonly string[];
  /** Validity from now (and an hour back, for clock skew). @default one year */
  validForMs?: number;
  /** The current time. @default now */
  now?: Date;
}

function length(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function tlv(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), length(body.length), body]);
}

const sequence = (...content: Buffer[]) => tlv(0x30, ...content);

function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split(".").map(Number);
  const bytes = [a! * 40 + b!];
  for (const arc of rest) {
    const chunk = [arc & 0x7f];
    for (let v = arc >>> 7; v > 0; v >>>= 7) chunk.unshift((v & 0x7f) | 0x80);
    bytes.push(...chunk);
  }
  return tlv(0x06, Buffer.from(bytes));
}

function utcTime(date: Date): Buffer {
  // UTCTime holds years 1950-2049; GeneralizedTime is required from 2050 on (RFC 5280 4.1.2.5).
  const iso = date.toISOString().replace(/[-:T]/g, "").slice(0, 14);
  return date.getUTCFullYear() < 2050
    ? tlv(0x17, Buffer.from(`${iso.slice(2)}Z`, "ascii"))
    : tlv(0x18, Buffer.from(`${iso}Z`, "ascii"));
}

function name(commonName: string): Buffer {
  return sequence(tlv(0x31, sequence(oid("2.5.4.3"), tlv(0x0c, Buffer.from(commonName, "utf8")))));
}

const ECDSA_WITH_SHA256 = sequence(oid("1.2.840.10045.4.3.2"));

/** A fresh key pair and a self-signed certificate for it, valid for serving TLS to the given names. */
export function selfSignedCertificate(options: SelfSignedOptions = {}): SelfSignedPair {
  const now = options.now ?? new Date();
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const serial = randomBytes(16);
  // Positive and minimal: the first byte in 0x01..0x7f.
  serial[0] = (serial[0]! & 0x7f) | 0x01;
  const altNames = [
    ...(options.dnsNames ?? ["localhost"]).map((dns) => tlv(0x82, Buffer.from(dns, "ascii"))),
    ...(options.ipAddresses ?? ["127.0.0.1"]).map((ip) => tlv(0x87, Buffer.from(ip.split(".").map(Number)))),
  ];
  const extensions = tlv(
    0xa3,
    sequence(
      // basicConstraints: not a CA (critical).
      sequence(oid("2.5.29.19"), tlv(0x01, Buffer.from([0xff])), tlv(0x04, sequence())),
      // keyUsage: digitalSignature (critical).
      sequence(
        oid("2.5.29.15"),
        tlv(0x01, Buffer.from([0xff])),
        tlv(0x04, tlv(0x03, Buffer.from([0x07, 0x80]))),
      ),
      // extKeyUsage: serverAuth.
      sequence(oid("2.5.29.37"), tlv(0x04, sequence(oid("1.3.6.1.5.5.7.3.1")))),
      // subjectAltName.
      sequence(oid("2.5.29.17"), tlv(0x04, sequence(...altNames))),
    ),
  );
  const subject = name(options.commonName ?? "referable-controller");
  const tbs = sequence(
    tlv(0xa0, tlv(0x02, Buffer.from([2]))), // version 3
    tlv(0x02, serial),
    ECDSA_WITH_SHA256,
    subject, // issuer: itself
    sequence(
      utcTime(new Date(now.getTime() - 3_600_000)),
      utcTime(new Date(now.getTime() + (options.validForMs ?? 365 * 24 * 3_600_000))),
    ),
    subject,
    publicKey.export({ type: "spki", format: "der" }),
    extensions,
  );
  const signature = sign("sha256", tbs, privateKey); // DER-encoded ECDSA signature
  const der = sequence(tbs, ECDSA_WITH_SHA256, tlv(0x03, Buffer.from([0]), signature));
  const base64 = der.toString("base64").replace(/.{64}/g, "$&\n");
  return {
    cert: `-----BEGIN CERTIFICATE-----\n${base64.trimEnd()}\n-----END CERTIFICATE-----\n`,
    key: privateKey.export({ type: "pkcs8", format: "pem" }) as string,
  };
}
