import { createPrivateKey, X509Certificate } from "node:crypto";
import { selfSignedCertificate } from "./self-signed.ts";

describe("selfSignedCertificate", () => {
  const now = new Date(Date.UTC(2026, 10, 25, 10, 0, 0));
  const pair = selfSignedCertificate({ now, dnsNames: ["localhost", "metrics.referable-system.svc"] });
  const cert = new X509Certificate(pair.cert);

  it("is a certificate Node (OpenSSL) parses, signed by its own key, and matching the key given", () => {
    expect(cert.verify(cert.publicKey)).toBe(true);
    expect(cert.checkPrivateKey(createPrivateKey(pair.key))).toBe(true);
    expect(cert.publicKey.asymmetricKeyDetails).toEqual({ namedCurve: "prime256v1" });
  });

  it("names the subject and its DNS names and 127.0.0.1, for serving only", () => {
    expect(cert.subject).toBe("CN=referable-controller");
    expect(cert.issuer).toBe(cert.subject);
    expect(cert.subjectAltName).toBe("DNS:localhost, DNS:metrics.referable-system.svc, IP Address:127.0.0.1");
    expect(cert.ca).toBe(false);
    expect(cert.keyUsage).toEqual(["1.3.6.1.5.5.7.3.1"]); // serverAuth
    expect(cert.checkHost("localhost")).toBe("localhost");
    expect(cert.checkIP("127.0.0.1")).toBe("127.0.0.1");
  });

  it("is valid from an hour before now (clock skew) for a year", () => {
    expect(new Date(cert.validFrom).toISOString()).toBe("2026-11-25T09:00:00.000Z");
    expect(new Date(cert.validTo).toISOString()).toBe("2027-11-25T10:00:00.000Z");
  });

  it("writes dates from 2050 as GeneralizedTime (RFC 5280)", () => {
    const late = new X509Certificate(selfSignedCertificate({ now: new Date(Date.UTC(2049, 11, 31)) }).cert);
    expect(new Date(late.validTo).getUTCFullYear()).toBe(2050);
  });

  it("gives each call its own key and serial", () => {
    const other = new X509Certificate(selfSignedCertificate().cert);
    expect(other.serialNumber).not.toBe(cert.serialNumber);
    expect(other.fingerprint256).not.toBe(cert.fingerprint256);
  });
});
