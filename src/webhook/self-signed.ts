/**
 * Certificates made in process (EC P-256, ECDSA with SHA-256): a self-signed serving certificate
 * for secure metrics when no certificate folder is given (controller-runtime's metrics server
 * does the same), and a CA with the serving certificates it signs for the webhook when the
 * controller manages its own (./webhook/cert-rotator.ts). Node's crypto signs but has no certificate builder, and the image has no openssl, so
 * the few DER structures of RFC 5280 that a certificate needs are written here.
 */
import {
  createHash,
  createPrivateKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  X509Certificate,
  type KeyObject,
} from "node:crypto";

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
const CRITICAL = tlv(0x01, Buffer.from([0xff]));

function pem(der: Buffer): string {
  const base64 = der.toString("base64").replace(/.{64}/g, "$&\n");
  return `-----BEGIN CERTIFICATE-----\n${base64.trimEnd()}\n-----END CERTIFICATE-----\n`;
}

/** The key identifier of a public key: SHA-1 of its SubjectPublicKeyInfo (RFC 7093, method 4's idea). */
function keyIdentifier(publicKey: KeyObject): Buffer {
  return createHash("sha1")
    .update(publicKey.export({ type: "spki", format: "der" }))
    .digest();
}

interface CertificateFields {
  subject: string;
  issuer: { name: string; key: KeyObject; keyId: Buffer };
  publicKey: KeyObject;
  isCA: boolean;
  dnsNames: readonly string[];
  ipAddresses: readonly string[];
  now: Date;
  validForMs: number;
}

function certificate(fields: CertificateFields): string {
  const { now } = fields;
  const serial = randomBytes(16);
  // Positive and minimal: the first byte in 0x01..0x7f.
  serial[0] = (serial[0]! & 0x7f) | 0x01;
  const extensions: Buffer[] = [];
  if (fields.isCA) {
    // basicConstraints: a CA, no intermediates below it (critical); keyUsage: keyCertSign, cRLSign.
    extensions.push(
      sequence(
        oid("2.5.29.19"),
        CRITICAL,
        tlv(0x04, sequence(tlv(0x01, Buffer.from([0xff])), tlv(0x02, Buffer.from([0])))),
      ),
      sequence(oid("2.5.29.15"), CRITICAL, tlv(0x04, tlv(0x03, Buffer.from([0x01, 0x06])))),
    );
  } else {
    const altNames = [
      ...fields.dnsNames.map((dns) => tlv(0x82, Buffer.from(dns, "ascii"))),
      ...fields.ipAddresses.map((ip) => tlv(0x87, Buffer.from(ip.split(".").map(Number)))),
    ];
    extensions.push(
      // basicConstraints: not a CA (critical).
      sequence(oid("2.5.29.19"), CRITICAL, tlv(0x04, sequence())),
      // keyUsage: digitalSignature (critical).
      sequence(oid("2.5.29.15"), CRITICAL, tlv(0x04, tlv(0x03, Buffer.from([0x07, 0x80])))),
      // extKeyUsage: serverAuth.
      sequence(oid("2.5.29.37"), tlv(0x04, sequence(oid("1.3.6.1.5.5.7.3.1")))),
      // subjectAltName.
      sequence(oid("2.5.29.17"), tlv(0x04, sequence(...altNames))),
    );
  }
  // subjectKeyIdentifier and authorityKeyIdentifier: how a verifier finds the issuer among several CAs.
  extensions.push(
    sequence(oid("2.5.29.14"), tlv(0x04, tlv(0x04, keyIdentifier(fields.publicKey)))),
    sequence(oid("2.5.29.35"), tlv(0x04, sequence(tlv(0x80, fields.issuer.keyId)))),
  );
  const tbs = sequence(
    tlv(0xa0, tlv(0x02, Buffer.from([2]))), // version 3
    tlv(0x02, serial),
    ECDSA_WITH_SHA256,
    name(fields.issuer.name),
    sequence(
      utcTime(new Date(now.getTime() - 3_600_000)),
      utcTime(new Date(now.getTime() + fields.validForMs)),
    ),
    name(fields.subject),
    fields.publicKey.export({ type: "spki", format: "der" }),
    tlv(0xa3, sequence(...extensions)),
  );
  const signature = sign("sha256", tbs, fields.issuer.key); // DER-encoded ECDSA signature
  return pem(sequence(tbs, ECDSA_WITH_SHA256, tlv(0x03, Buffer.from([0]), signature)));
}

const YEAR_MS = 365 * 24 * 3_600_000;

/** What a certificate says of the key it is made for, the issuer and the key aside. */
type Subject = Omit<CertificateFields, "issuer" | "publicKey">;

/**
 * A fresh key pair (EC P-256) and a certificate for it: signed by `issuer`, or self-signed (its
 * own name and key as the issuer) when there is none.
 */
function issue(subject: Subject, issuer?: CertificateFields["issuer"]): SelfSignedPair {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const signer = issuer ?? { name: subject.subject, key: privateKey, keyId: keyIdentifier(publicKey) };
  return {
    cert: certificate({ ...subject, issuer: signer, publicKey }),
    key: privateKey.export({ type: "pkcs8", format: "pem" }) as string,
  };
}

/** A serving certificate's subject from `options`, with `ipAddresses` where they name none. */
function servingSubject(options: SelfSignedOptions, ipAddresses: readonly string[]): Subject {
  return {
    subject: options.commonName ?? "referable-controller",
    isCA: false,
    dnsNames: options.dnsNames ?? ["localhost"],
    ipAddresses: options.ipAddresses ?? ipAddresses,
    now: options.now ?? new Date(),
    validForMs: options.validForMs ?? YEAR_MS,
  };
}

/** A fresh key pair and a self-signed certificate for it, valid for serving TLS to the given names. */
export function selfSignedCertificate(options: SelfSignedOptions = {}): SelfSignedPair {
  return issue(servingSubject(options, ["127.0.0.1"]));
}

/** Options for {@link certificateAuthority}. */
export interface CertificateAuthorityOptions {
  /** The CA's common name. @default "referable-ca" */
  commonName?: string;
  /** Validity from now (and an hour back). @default ten years */
  validForMs?: number;
  /** @default now */
  now?: Date;
}

/** A fresh self-signed CA (EC P-256) that signs nothing but leaf certificates. */
export function certificateAuthority(options: CertificateAuthorityOptions = {}): SelfSignedPair {
  return issue({
    subject: options.commonName ?? "referable-ca",
    isCA: true,
    dnsNames: [],
    ipAddresses: [],
    now: options.now ?? new Date(),
    validForMs: options.validForMs ?? 10 * YEAR_MS,
  });
}

/** A fresh key pair and a serving certificate for it, signed by `ca` (a pair of {@link certificateAuthority}). */
export function signedCertificate(ca: SelfSignedPair, options: SelfSignedOptions = {}): SelfSignedPair {
  const caCert = new X509Certificate(ca.cert);
  // The issuer's name as the CA's subject, which is a single common name when made here.
  return issue(servingSubject(options, []), {
    name: commonNameOf(caCert),
    key: createPrivateKey(ca.key),
    keyId: keyIdentifier(caCert.publicKey),
  });
}

function commonNameOf(cert: X509Certificate): string {
  const cn = /^CN=(.*)$/m.exec(cert.subject)?.[1];
  if (cn === undefined || cert.subject.trim() !== `CN=${cn}`)
    throw new Error(`the CA's subject must be one common name, not ${JSON.stringify(cert.subject)}`);
  return cn;
}
