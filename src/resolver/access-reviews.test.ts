import { describe, expect, it } from "@jest/globals";
import { AccessReviews, type AccessAttributes, type AccessHolder } from "./access-reviews.ts";

const account = { namespace: "team-a", name: "reader" };
const cm = (namespace: string, name?: string): AccessAttributes =>
  name === undefined
    ? { verb: "get", group: "", resource: "configmaps", namespace }
    : { verb: "get", group: "", resource: "configmaps", namespace, name };

interface Review {
  spec: { user: string; groups: string[]; resourceAttributes: Record<string, string> };
}

/** A fake SubjectAccessReview endpoint: `allow` decides, every review is recorded, answers wait for `release`. */
function fakeServer(allow: (attrs: Record<string, string>) => boolean | Error) {
  const reviews: Review["spec"][] = [];
  let gate: Promise<void> = Promise.resolve();
  let open: () => void = () => undefined;
  const client = {
    request: async <T>(_method: string, _path: string, options?: { body?: unknown }): Promise<T> => {
      const spec = (options!.body as Review).spec;
      reviews.push(spec);
      await gate;
      const answer = allow(spec.resourceAttributes);
      if (answer instanceof Error) throw answer;
      return { status: { allowed: answer } } as T;
    },
    watch: () => {
      throw new Error("no watch in this test");
    },
  };
  return {
    client,
    reviews,
    hold: () => {
      gate = new Promise((resolve) => (open = resolve));
    },
    release: () => open(),
  };
}

const holder = (): AccessHolder => ({ accessHeld: undefined });

/** Checks until known, as the resolver does (wake: check again). */
function settle(access: AccessReviews, attrs: AccessAttributes, h = holder()) {
  return new Promise<NonNullable<ReturnType<AccessReviews["check"]>>>((resolve) => {
    const attempt = () => {
      const v = access.check(account, attrs, h, attempt);
      if (v) resolve(v);
    };
    attempt();
  });
}

describe("AccessReviews", () => {
  it("reviews as the ServiceAccount, with its user and groups", async () => {
    const server = fakeServer(() => true);
    const access = new AccessReviews({ client: server.client, watchRbac: false });
    expect(await settle(access, cm("team-a", "db"))).toEqual({ allowed: true });
    expect(server.reviews[0]).toEqual({
      user: "system:serviceaccount:team-a:reader",
      groups: ["system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"],
      resourceAttributes: { verb: "get", group: "", resource: "configmaps", namespace: "team-a" },
    });
    await access.stop();
  });

  it("asks for the whole namespace first, and for the named object only when that is refused", async () => {
    const server = fakeServer((a) => a.name === "db");
    const access = new AccessReviews({ client: server.client, watchRbac: false });
    expect(await settle(access, cm("team-b", "db"))).toEqual({ allowed: true });
    const other = await settle(access, cm("team-b", "other"));
    expect(other.allowed).toBe(false);
    expect(other.allowed === false && other.message).toBe(
      'serviceaccount team-a/reader may not get configmaps "other" in namespace "team-b": grant it that (a Role and a RoleBinding), or act as another ServiceAccount',
    );
    // The namespace was asked once, for both names.
    expect(server.reviews.map((r) => r.resourceAttributes.name ?? "*")).toEqual(["*", "db", "other"]);
    await access.stop();
  });

  it("makes one review for many identical checks at once, and none while the answer is fresh", async () => {
    const server = fakeServer(() => true);
    const access = new AccessReviews({ client: server.client, watchRbac: false });
    server.hold();
    const all = Array.from({ length: 100 }, (_, i) => settle(access, cm("team-a", `cm-${i}`)));
    server.release();
    expect((await Promise.all(all)).every((v) => v.allowed)).toBe(true);
    expect(await settle(access, cm("team-a", "later"))).toEqual({ allowed: true });
    expect(server.reviews).toHaveLength(1);
    await access.stop();
  });

  it("asks again when an answer someone holds expires, and tells when it changed", async () => {
    let allowed = true;
    const server = fakeServer(() => allowed);
    const access = new AccessReviews({ client: server.client, watchRbac: false, ttlMs: 50 });
    const changed: unknown[] = [];
    access.onChange((entries) => changed.push(entries));
    const h = holder();
    expect(await settle(access, cm("team-a"), h)).toEqual({ allowed: true });
    allowed = false;
    const deadline = Date.now() + 5000;
    while (changed.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(changed).toHaveLength(1);
    expect((await settle(access, cm("team-a"), h)).allowed).toBe(false);
    await access.stop();
  });

  it("drops an answer nobody holds when it expires, without asking again", async () => {
    const server = fakeServer(() => true);
    const access = new AccessReviews({ client: server.client, watchRbac: false, ttlMs: 20 });
    const h = holder();
    await settle(access, cm("team-a"), h);
    access.release(h);
    const deadline = Date.now() + 5000;
    while (access.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(access.size).toBe(0);
    expect(server.reviews).toHaveLength(1);
    await access.stop();
  });

  it("drops every answer at once (an RBAC change) and tells the holders", async () => {
    let allowed = true;
    const server = fakeServer(() => allowed);
    const access = new AccessReviews({ client: server.client, watchRbac: false });
    const told = new Promise((resolve) => access.onChange(resolve));
    await settle(access, cm("team-a"));
    allowed = false;
    access.dropAll();
    expect(await told).toBe("all");
    expect((await settle(access, cm("team-a"))).allowed).toBe(false);
    expect(server.reviews).toHaveLength(2);
    await access.stop();
  });

  it("refuses while a review cannot be made, saying so", async () => {
    const server = fakeServer(() => new Error("connection refused"));
    const access = new AccessReviews({ client: server.client, watchRbac: false });
    const verdict = await settle(access, cm("team-a", "db"));
    expect(verdict.allowed).toBe(false);
    expect(verdict.allowed === false && verdict.message).toContain(
      "could not check whether serviceaccount team-a/reader may get configmaps",
    );
    await access.stop();
  });

  it("keeps at most maxEntries answers nobody holds, and every answer someone holds", async () => {
    const server = fakeServer((a) => a.name === undefined && a.namespace === "never");
    const access = new AccessReviews({ client: server.client, watchRbac: false, maxEntries: 10 });
    for (let i = 0; i < 50; i++) {
      const h = holder();
      await settle(access, cm("team-b", `gone-${i}`), h);
      access.release(h); // a subscription closed
    }
    expect(access.size).toBeLessThanOrEqual(10);
    const held = Array.from({ length: 20 }, () => holder());
    for (const [i, h] of held.entries()) await settle(access, cm("team-c", `kept-${i}`), h);
    const before = server.reviews.length;
    // Every held answer is still there: asked again, none needs a review.
    for (const [i, h] of held.entries()) await settle(access, cm("team-c", `kept-${i}`), h);
    expect(server.reviews.length).toBe(before);
    await access.stop();
  });
});
