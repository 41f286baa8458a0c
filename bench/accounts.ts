/** The accounts scenario (issue 37): Referables acting as ServiceAccounts, and the reviews they cost. */
import type { ControlPlane } from "../test/harness/control-plane.ts";
import { deleteFixtures, makeConfigMapFixture, NS, setSource } from "./fixtures.ts";
import { scrape, sumOf } from "./metrics.ts";
import { accountRestSeconds, log, quick, RUN } from "./options.ts";
import { watchAndStart } from "./referable-watch.ts";
import type { BenchClient } from "./retry.ts";
import { type Stats, stats, timeToShow, until } from "./stats.ts";

/** The accounts scenario's figures. */
export interface AccountsResult {
  refs: number;
  accounts: number;
  /** SubjectAccessReviews made until every Referable was Available (referable_access_reviews_total). */
  reviewsToReady: number;
  restSeconds: number;
  /** Reviews made at rest, per minute: all of them, and per (account, resource) (one resource here). */
  reviewsPerMinute: number;
  reviewsPerAccountResourcePerMinute: number;
  /** Reviews made while the rounds below ran (none is needed: every answer is cached). */
  reviewsDuringRounds: number;
  /** Source write → status.value of a Referable that names an account... */
  withAccount: Stats;
  /** ...and of one that names none, in the same run, rounds interleaved. */
  withoutAccount: Stats;
}

/**
 * Referables acting as ServiceAccounts (issue 37): `n` Referables over ConfigMaps of their own,
 * each naming one of `k` ServiceAccounts (all allowed to read the namespace), beside a few that
 * name none. Counts the SubjectAccessReviews the controller makes to get every Referable Ready
 * and then at rest (the answers are cached per account and resource and asked again once a
 * minute), and times a source write to the status with and without an account, interleaved.
 */
export async function runAccounts(
  client: BenchClient,
  plane: ControlPlane,
  n: number,
  k: number,
): Promise<AccountsResult> {
  log(
    `accounts: ${n} Referables sharing ${k} ServiceAccounts, reviews counted ${accountRestSeconds} s at rest`,
  );
  const label = `${RUN}-acc`;
  const labels = { "bench-set": label };
  const plain = Math.max(10, Math.round(n / 20));
  const accounts = Array.from({ length: k }, (_, a) => `${label}-sa${a}`);
  for (const name of accounts)
    await client.request("POST", `/api/v1/namespaces/${NS}/serviceaccounts`, {
      body: { apiVersion: "v1", kind: "ServiceAccount", metadata: { name, labels } },
    });
  const rbac = `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}`;
  await client.request("POST", `${rbac}/roles`, {
    body: {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: label, labels },
      rules: [{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list", "watch"] }],
    },
  });
  await client.request("POST", `${rbac}/rolebindings`, {
    body: {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: label, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: label },
      subjects: accounts.map((name) => ({ kind: "ServiceAccount", name, namespace: NS })),
    },
  });
  await makeConfigMapFixture(client, label, n + plain, (i) =>
    i < n ? { serviceAccountRef: { namespace: NS, name: accounts[i % k] } } : {},
  );
  const { watch, c } = await watchAndStart(client, plane, label);
  const reviews = async () => sumOf(await scrape(c), "referable_access_reviews_total");
  try {
    await until(
      `all ${n + plain} accounts Referables Ready`,
      () => (watch.readyCount() >= n + plain ? true : undefined),
      600_000,
    );
    const ready = await reviews();
    await new Promise((r) => setTimeout(r, accountRestSeconds * 1000));
    const rested = await reviews();
    const withAccount: number[] = [];
    const withoutAccount: number[] = [];
    for (let round = 1; round <= (quick ? 30 : 100); round++) {
      for (const [i, samples] of [
        [round % n, withAccount],
        [n + (round % plain), withoutAccount],
      ] as const) {
        const value = `x${round}`;
        samples.push(
          await timeToShow(
            watch,
            () => watch.latest.get(`${label}-rf${i}`)?.value === value,
            () => setSource(client, "ConfigMap", `${label}-s${i}`, value),
            `accounts round ${round}`,
          ),
        );
      }
    }
    const after = await reviews();
    const perMinute = ((rested - ready) * 60) / accountRestSeconds;
    return {
      refs: n,
      accounts: k,
      reviewsToReady: ready,
      restSeconds: accountRestSeconds,
      reviewsPerMinute: Number(perMinute.toFixed(2)),
      reviewsPerAccountResourcePerMinute: Number((perMinute / k).toFixed(2)),
      reviewsDuringRounds: after - rested,
      withAccount: stats(withAccount),
      withoutAccount: stats(withoutAccount),
    };
  } finally {
    await c.stop();
    watch.close();
    await deleteFixtures(client, label);
    await client.request("DELETE", `${rbac}/rolebindings/${label}`).catch(() => undefined);
    await client.request("DELETE", `${rbac}/roles/${label}`).catch(() => undefined);
    for (const name of accounts)
      await client
        .request("DELETE", `/api/v1/namespaces/${NS}/serviceaccounts/${name}`)
        .catch(() => undefined);
  }
}
