import { copyFile, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import type { Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, fetch } from "undici";
import { waitFor } from "../../test/harness/kube.ts";
import { makeTestCa, presentedFingerprint, secretVolume, type TestCa } from "../../test/harness/webhook.ts";
import { InvalidAdmissionReview } from "./admission-review.ts";
import type { AdmissionHandler } from "./admission.ts";
import { startWebhookServer, WEBHOOK_PATH } from "./server.ts";
import { describeCertificate, readKeyPair, ServingCertificate } from "./serving-certificate.ts";

let dir: string;
let ca: TestCa;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "referable-webhook-unit-"));
  ca = await makeTestCa(join(dir, "ca"));
}, 30_000);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("startWebhookServer", () => {
  let server: Server;
  let agent: Agent;
  let base: string;
  let rotate: () => Promise<void>;
  let certFile: string;
  const handler: AdmissionHandler = async (body) => {
    const request = (body as { request?: { uid?: string } }).request;
    if (request?.uid === "invalid")
      throw new InvalidAdmissionReview("the AdmissionReview request has no uid");
    if (request?.uid === "crash") throw new Error("boom");
    return {
      apiVersion: "admission.k8s.io/v1",
      kind: "AdmissionReview",
      response: { uid: request?.uid ?? "", allowed: true },
    };
  };

  beforeAll(async () => {
    const volume = await secretVolume(join(dir, "serving-certs"), ca);
    rotate = volume.rotate;
    certFile = volume.certFile;
    server = await startWebhookServer({
      address: "127.0.0.1:0",
      certFile: volume.certFile,
      keyFile: volume.keyFile,
      handler,
      maxBodyBytes: 1024,
    });
    base = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
    agent = new Agent({ connect: { ca: await readFile(ca.certFile) } });
  }, 30_000);
  afterAll(async () => {
    await agent.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const post = (body: string, path = WEBHOOK_PATH) =>
    fetch(`${base}${path}`, {
      method: "POST",
      body,
      dispatcher: agent,
      headers: { "Content-Type": "application/json" },
    });

  const cases: Array<{
    reason: string;
    send: () => ReturnType<typeof fetch>;
    status: number;
    body?: RegExp;
  }> = [
    {
      reason: "the probe answers",
      send: () => fetch(`${base}/healthz`, { dispatcher: agent }),
      status: 200,
      body: /^ok$/,
    },
    {
      reason: "a review is answered with the handler's verdict",
      send: () => post(JSON.stringify({ request: { uid: "r1" } })),
      status: 200,
      body: /"uid":"r1","allowed":true/,
    },
    {
      reason: "the query string the API server adds is ignored",
      send: () => post("{}", `${WEBHOOK_PATH}?timeout=10s`),
      status: 200,
    },
    {
      reason: "only POST is served on the webhook path",
      send: () => fetch(`${base}${WEBHOOK_PATH}`, { dispatcher: agent }),
      status: 405,
    },
    { reason: "other paths are not served", send: () => post("{}", "/mutate"), status: 404 },
    {
      reason: "a body that is not JSON is a bad request",
      send: () => post("{not json"),
      status: 400,
      body: /not JSON/,
    },
    {
      reason: "a body that is not an AdmissionReview is a bad request",
      send: () => post(JSON.stringify({ request: { uid: "invalid" } })),
      status: 400,
      body: /no uid/,
    },
    {
      reason: "a handler failure is a 500 without its details, and the server goes on",
      send: () => post(JSON.stringify({ request: { uid: "crash" } })),
      status: 500,
      body: /^the admission check failed$/,
    },
    {
      reason: "a body over the limit is refused",
      send: () => post(JSON.stringify({ pad: "x".repeat(2048) })),
      status: 413,
    },
  ];
  it.each(cases)("$reason", async ({ send, status, body }) => {
    const response = await send();
    const text = await response.text();
    expect({ status: response.status, text }).toEqual({
      status,
      text: body ? expect.stringMatching(body) : expect.any(String),
    });
  });

  it("presents a rotated certificate to new connections without a restart", async () => {
    const before = await presentedFingerprint((server.address() as AddressInfo).port, ca.certFile);
    await rotate();
    const after = describeCertificate(await readFile(certFile)).fingerprint256;
    expect(after).not.toBe(before);
    await waitFor(
      "the new certificate to be presented",
      async () => (await presentedFingerprint((server.address() as AddressInfo).port, ca.certFile)) === after,
    );
    expect((await post(JSON.stringify({ request: { uid: "r2" } }))).status).toBe(200);
  });

  it("refuses to start without a usable certificate, naming the files", async () => {
    await expect(
      startWebhookServer({
        address: "127.0.0.1:0",
        certFile: join(dir, "none.crt"),
        keyFile: join(dir, "none.key"),
        handler,
      }),
    ).rejects.toThrow(/none\.crt/);
  });
});

describe("ServingCertificate", () => {
  it("skips a pair that does not match and takes the next good one", async () => {
    const files = join(dir, "plain");
    const first = await ca.issue(join(dir, "first"));
    const second = await ca.issue(join(dir, "second"));
    const certFile = join(files, "tls.crt");
    const keyFile = join(files, "tls.key");
    await ca.issue(files); // creates the folder
    await copyFile(first.certFile, certFile);
    await copyFile(first.keyFile, keyFile);
    const changes: Buffer[] = [];
    const cert = await ServingCertificate.open({
      certFile,
      keyFile,
      onChange: (pair) => changes.push(pair.cert),
      checkIntervalMs: 3_600_000,
    });
    // The folder watch may run a check of its own at any time, so the assertions are on the
    // state reached, not on which check got there.
    try {
      await cert.check();
      expect(changes).toEqual([]); // unchanged files

      // Half a rotation: the new key beside the old certificate does not load.
      await copyFile(second.keyFile, keyFile);
      await cert.check();
      expect(cert.current.cert.equals(await readFile(first.certFile))).toBe(true);

      await copyFile(second.certFile, certFile);
      await cert.check();
      expect(changes).toEqual([await readFile(second.certFile)]);

      // A file that is briefly empty (truncated before it is written) is skipped too.
      await writeFile(certFile, "");
      await cert.check();
      expect(changes).toHaveLength(1);
      expect(cert.current.cert.equals(await readFile(second.certFile))).toBe(true);
    } finally {
      cert.close();
    }
  }, 30_000);
});

describe("readKeyPair", () => {
  it.each([
    { missing: ["cert"], why: "the certificate alone missing" },
    { missing: ["key"], why: "the key alone missing: the certificate is named all the same" },
    { missing: ["cert", "key"], why: "both missing, whichever read fails first" },
  ])("names both files, and what failed, with $why", async ({ missing }) => {
    const pair = await ca.issue(join(dir, `read-${missing.join("-")}`));
    const certFile = missing.includes("cert") ? join(dir, "absent.crt") : pair.certFile;
    const keyFile = missing.includes("key") ? join(dir, "absent.key") : pair.keyFile;
    const err = (await readKeyPair(certFile, keyFile).catch((e: unknown) => e)) as Error;
    expect(err.message).toContain(certFile);
    expect(err.message).toContain(keyFile);
    for (const file of missing)
      expect(err.message).toContain(
        `ENOENT: no such file or directory, open '${file === "cert" ? certFile : keyFile}'`,
      );
  });
});
