import { jest } from "@jest/globals";
import { X509Certificate } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MetricsAuthorizer, openSecureMetrics } from "./metrics-auth.ts";
import { selfSignedCertificate } from "../webhook/self-signed.ts";

/** A fake of the client's `request` (our interface): a TokenReview and SubjectAccessReview server. */
function fakeReviews(users: Record<string, { username: string; allowed: boolean }>) {
  const calls: Array<{ path: string; body: Record<string, unknown> }> = [];
  let failing = false;
  const request = async (_method: string, path: string, options: { body?: unknown } = {}) => {
    const body = options.body as Record<string, unknown>;
    calls.push({ path, body });
    if (failing) throw new Error("connection refused");
    const spec = body.spec as Record<string, unknown>;
    if (path.endsWith("/tokenreviews")) {
      const user = users[spec.token as string];
      return user
        ? { status: { authenticated: true, user: { username: user.username, groups: ["g"], uid: "u" } } }
        : { status: { authenticated: false, error: "invalid bearer token" } };
    }
    const user = Object.values(users).find((u) => u.username === spec.user);
    return { status: { allowed: user?.allowed === true } };
  };
  return {
    client: { request } as never,
    calls,
    fail: (on: boolean) => (failing = on),
  };
}

const USERS = {
  "reader-token": { username: "system:serviceaccount:monitoring:prometheus", allowed: true },
  "other-token": { username: "system:serviceaccount:team:app", allowed: false },
};

describe("MetricsAuthorizer", () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  const cases: Array<{ reason: string; header: string | undefined; status: number; message: string }> = [
    {
      reason: "no Authorization header",
      header: undefined,
      status: 401,
      message: "a bearer token is required",
    },
    {
      reason: "not a bearer token",
      header: "Basic dXNlcjpwYXNz",
      status: 401,
      message: "a bearer token is required",
    },
    {
      reason: "a token the API server does not know",
      header: "Bearer made-up",
      status: 401,
      message: "not valid",
    },
    {
      reason: "a known user without get on /metrics",
      header: "Bearer other-token",
      status: 403,
      message: 'user "system:serviceaccount:team:app" may not get /metrics',
    },
    {
      reason: "a user with the metrics-reader role",
      header: "Bearer reader-token",
      status: 200,
      message: "",
    },
  ];
  it.each(cases)("$reason: $status", async ({ header, status, message }) => {
    const { client } = fakeReviews(USERS);
    const decision = await new MetricsAuthorizer({ client }).decide(header);
    expect(decision.status).toBe(status);
    expect(decision.message).toContain(message);
    expect(decision.message).not.toContain("token\u0022"); // never echoes the token
  });

  it("asks about get on the non-resource URL /metrics, for the user, groups and uid the TokenReview named", async () => {
    const { client, calls } = fakeReviews(USERS);
    await new MetricsAuthorizer({ client }).decide("Bearer reader-token");
    expect(calls.map((c) => c.path)).toEqual([
      "/apis/authentication.k8s.io/v1/tokenreviews",
      "/apis/authorization.k8s.io/v1/subjectaccessreviews",
    ]);
    expect(calls[1]!.body.spec).toEqual({
      nonResourceAttributes: { path: "/metrics", verb: "get" },
      user: "system:serviceaccount:monitoring:prometheus",
      uid: "u",
      groups: ["g"],
    });
  });

  it("remembers an allowed token for allowTtlMs and a refused one for denyTtlMs, then asks again", async () => {
    const { client } = fakeReviews(USERS);
    const auth = new MetricsAuthorizer({ client, allowTtlMs: 60_000, denyTtlMs: 10_000 });
    await auth.decide("Bearer reader-token");
    await auth.decide("Bearer other-token");
    expect(auth.reviews).toBe(4);
    await jest.advanceTimersByTimeAsync(9_000);
    await auth.decide("Bearer reader-token");
    await auth.decide("Bearer other-token");
    expect(auth.reviews).toBe(4); // both cached
    await jest.advanceTimersByTimeAsync(2_000);
    await auth.decide("Bearer reader-token");
    await auth.decide("Bearer other-token");
    expect(auth.reviews).toBe(6); // the refusal expired; the allowance did not
    await jest.advanceTimersByTimeAsync(60_000);
    await auth.decide("Bearer reader-token");
    expect(auth.reviews).toBe(8);
  });

  it("shares one review among concurrent requests with one token", async () => {
    const { client } = fakeReviews(USERS);
    const auth = new MetricsAuthorizer({ client });
    const decisions = await Promise.all([1, 2, 3].map(() => auth.decide("Bearer reader-token")));
    expect(decisions.map((d) => d.status)).toEqual([200, 200, 200]);
    expect(auth.reviews).toBe(2);
  });

  it("keeps at most maxCachedTokens tokens: a flood of made-up tokens costs reviews, not memory", async () => {
    const { client } = fakeReviews(USERS);
    const auth = new MetricsAuthorizer({ client, maxCachedTokens: 4 });
    for (let i = 0; i < 100; i++) expect((await auth.decide(`Bearer bogus-${i}`)).status).toBe(401);
    expect((auth as unknown as { cache: { size: number } }).cache.size).toBe(4);
  });

  it("answers 503 when a review cannot be made, and does not remember it", async () => {
    const reviews = fakeReviews(USERS);
    const auth = new MetricsAuthorizer({ client: reviews.client });
    reviews.fail(true);
    expect((await auth.decide("Bearer reader-token")).status).toBe(503);
    reviews.fail(false);
    expect((await auth.decide("Bearer reader-token")).status).toBe(200);
  });
});

describe("openSecureMetrics", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "referable-metrics-cert-"));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("makes a self-signed certificate for the names given when no folder is set", async () => {
    const secure = await openSecureMetrics({
      client: fakeReviews(USERS).client,
      certDir: undefined,
      dnsNames: ["a.example"],
    });
    expect(new X509Certificate(secure.tls.cert).subjectAltName).toContain("DNS:a.example");
    secure.close();
  });

  it("serves the pair of --metrics-cert-dir (tls.crt and tls.key)", async () => {
    const pair = selfSignedCertificate({ commonName: "from-the-folder" });
    await writeFile(join(dir, "tls.crt"), pair.cert);
    await writeFile(join(dir, "tls.key"), pair.key);
    const secure = await openSecureMetrics({ client: fakeReviews(USERS).client, certDir: dir });
    expect(new X509Certificate(secure.tls.cert).subject).toBe("CN=from-the-folder");
    expect((await secure.authorize("Bearer reader-token")).status).toBe(200);
    secure.close();
  });

  it("rejects, naming the file, when the folder holds no pair", async () => {
    const empty = await mkdtemp(join(tmpdir(), "referable-metrics-cert-empty-"));
    await expect(openSecureMetrics({ client: fakeReviews(USERS).client, certDir: empty })).rejects.toThrow(
      /tls\.(crt|key)/,
    );
    await rm(empty, { recursive: true, force: true });
  });
});
